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
  switch (options.mode) {
    case Mode::kMegatronLm: return EstimateMegatronLm(job, options);
    case Mode::kBridge: return EstimateBridge(job, options);
    case Mode::kAccurate: break;
  }
  return internal::EstimateAccurate(job, options);
}

}  // namespace memtune::estimate
