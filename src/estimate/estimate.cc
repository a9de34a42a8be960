// EstimateMemory: dispatch on the mode; mode names.
#include "memtune/estimate/estimate.h"

#include <string>

#include "accurate.h"
#include "memtune/estimate/compat.h"
#include "memtune/model/checks.h"

namespace memtune::estimate {

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kAccurate: return "accurate";
    case Mode::kMegatronLm: return "megatron-lm";
    case Mode::kBridge: return "bridge";
  }
  return "accurate";
}

Result<Mode> ParseMode(std::string_view name, std::string_view field) {
  for (Mode mode : {Mode::kAccurate, Mode::kMegatronLm, Mode::kBridge}) {
    if (name == ModeName(mode)) return mode;
  }
  return InvalidInput(std::string(field), "unknown mode '" + std::string(name) +
                                              "'; allowed: accurate, megatron-lm, bridge");
}

namespace {

// A job whose layout does not divide has no memory figure: refuse it with the first
// structural violation (model::BlocksEstimate), naming its field, value and fix.
std::optional<Error> RefuseInconsistentJob(const model::Job& job) {
  const std::vector<model::Finding> errors = model::StructuralErrors(job);
  if (errors.empty()) return std::nullopt;
  const model::Finding& first = errors.front();
  std::string field = first.fields.empty() ? std::string() : first.fields.front().first;
  std::string message = first.message + " [" + first.rule_id + "]";
  if (errors.size() > 1) {
    message += " (and " + std::to_string(errors.size() - 1) + " more; `memtune check` lists them all)";
  }
  return InvalidConfig(std::move(field), std::move(message), first.fix);
}

}  // namespace

Result<Estimate> EstimateMemory(const model::Job& job, const EstimateOptions& options) {
  if (auto refusal = RefuseInconsistentJob(job)) return *refusal;
  if (options.mode == Mode::kAccurate) return internal::EstimateAccurate(job, options);
  MEMTUNE_TRY(auto estimate, options.mode == Mode::kBridge ? EstimateBridge(job, options)
                                                            : EstimateMegatronLm(job, options));
  MEMTUNE_RETURN_IF_ERROR(internal::FillGpuFacts(job, estimate));  // for the fits verdict
  return estimate;
}

}  // namespace memtune::estimate
