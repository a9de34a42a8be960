// The allocator configuration a process runs with, read from its environment the way
// PyTorch reads it: which of PYTORCH_ALLOC_CONF and PYTORCH_CUDA_ALLOC_CONF supplies which
// options in a given release, parsed by ParseAllocatorConfig. The one interpretation of those
// variables that `check`, the forecast and lint share (docs/allocator.md section 7).
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "memtune/alloc/config.h"
#include "memtune/core/result.h"

namespace memtune::alloc {

inline constexpr std::string_view kAllocConfVar = "PYTORCH_ALLOC_CONF";           // >= 2.9
inline constexpr std::string_view kCudaAllocConfVar = "PYTORCH_CUDA_ALLOC_CONF";  // all releases

// A config read from an environment, and where its options came from.
struct EnvAllocatorConfig {
  AllocatorConfig config;
  // The variable the device-generic options (expandable_segments, max_split_size_mb,
  // roundup_power2_divisions, garbage_collection_threshold, max_non_split_rounding_mb)
  // came from; "" when neither variable is set (PyTorch's defaults).
  std::string source_var;
  // The variable the CUDA-specific options (backend, per_process_memory_fraction, ...)
  // came from; "" when neither is set. Differs from source_var only when both are set.
  std::string cuda_source_var;
};

// Reads the allocator config of `version` from `env` (variable name -> value):
// - before 2.9 only PYTORCH_CUDA_ALLOC_CONF is read (PYTORCH_ALLOC_CONF did not exist);
// - from 2.9 (c10/core/AllocatorConfig.cpp, AcceleratorAllocatorConfig::instance()) the
//   device-generic options come from PYTORCH_ALLOC_CONF when it is set, else from
//   PYTORCH_CUDA_ALLOC_CONF; the CUDA hook (c10/cuda/CUDAAllocatorConfig.h, instance())
//   reads PYTORCH_CUDA_ALLOC_CONF first and PYTORCH_ALLOC_CONF only when that is unset.
// Both strings that PyTorch parses must parse. `field_prefix` is prepended to the variable
// name in errors (e.g. "memtune.env.").
// Errors: kInvalidConfig with field "<prefix><VAR> (<option>)" and PyTorch's own message.
// Example: AllocatorConfigFromEnv({{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"}},
//                                 {2, 4})->config.expandable_segments == true.
Result<EnvAllocatorConfig> AllocatorConfigFromEnv(const std::map<std::string, std::string>& env,
                                                  TorchVersion version,
                                                  std::string_view field_prefix = "");

// `config` with expandable segments on or off, and `settings` rewritten as a user would
// set it: every expandable_segments item takes the new value in place; without one,
// ",expandable_segments:True" (or "False") is appended. Everything else is kept.
// Example: WithExpandableSegments(<"max_split_size_mb:128">, true).settings ==
//          "max_split_size_mb:128,expandable_segments:True".
AllocatorConfig WithExpandableSegments(const AllocatorConfig& config, bool enabled);

}  // namespace memtune::alloc
