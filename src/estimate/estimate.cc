// EstimateMemory: dispatch on the mode; mode names.
#include "memtune/estimate/estimate.h"

#include <string>

#include "accurate.h"
#include "memtune/estimate/compat.h"

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

Result<Estimate> EstimateMemory(const model::Job& job, const EstimateOptions& options) {
  if (options.mode == Mode::kAccurate) return internal::EstimateAccurate(job, options);
  MEMTUNE_TRY(auto estimate, options.mode == Mode::kBridge ? EstimateBridge(job, options)
                                                            : EstimateMegatronLm(job, options));
  MEMTUNE_RETURN_IF_ERROR(internal::FillGpuFacts(job, estimate));  // for the fits verdict
  return estimate;
}

}  // namespace memtune::estimate
