// AllocatorConfig: a parsed PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF string, and the
// PyTorch version profile that selects the rules which changed between releases.
//
// The parser follows PyTorch's own: its tokenizer, defaults, limits and error texts
// (docs/shared allocator.md section 7; PyTorch c10/cuda/CUDAAllocatorConfig.cpp up to 2.8,
// c10/core/AllocatorConfig.cpp + the CUDA hook from 2.9). Options that do not change device
// memory (host/pinned options, lock release, CUDA graph reuse) or that memtune does not
// simulate (backend:cudaMallocAsync) are accepted and listed in `not_simulated`.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/alloc/constants.h"
#include "memtune/core/result.h"

namespace memtune::alloc {

// A PyTorch release "2.<minor>" or "main" (late-2025 main, allocator.md's VMAIN).
// Ordered: 2.1 < 2.2 < ... < 2.10 < main.
struct TorchVersion {
  static constexpr int kMainMinor = 99;  // "main" sorts after every release
  int major = 2;
  int minor = 9;

  bool IsMain() const { return minor == kMainMinor; }
  // "2.4" or "main".
  std::string ToString() const;
  auto operator<=>(const TorchVersion&) const = default;
};

// The version memtune assumes when none is given.
inline constexpr TorchVersion kDefaultTorchVersion{2, 9};

// Parses "2.4", "2.4.1", "v2.4", "2.4.0+cu121" or "main". Accepted releases: 2.1 to 2.10.
// Errors: kInvalidInput naming `field` for a malformed string; kUnsupported for a release
// memtune does not model (1.x, 2.0, 2.11+), with a hint to use "main".
Result<TorchVersion> ParseTorchVersion(std::string_view text, std::string_view field);

// Which OOM message template a release prints (allocator.md section 6).
enum class OomTemplate {
  kV21,  // 2.1: "total capacty", hint about max_split_size_mb
  kV22,  // 2.2-2.3: no "allowed" / private-pool parts, device index streamed as a char
  kV24,  // 2.4 and later
};

// The rules that differ between releases. Boundaries marked "approx." in
// docs/design/allocator.md [version profile] were inferred from code features.
struct VersionRules {
  bool roundup_needs_two_divisions;  // >= 2.4: round only when d > 1; older: d > 0, d == 1 keeps n
  bool roundup_gt_fills_after_last;  // >= 2.9: '>:V' fills from last index + 1 (older: from it)
  bool roundup_list_accepts_zero;    // >= 2.4 (approx.): a list value may be 0
  bool divisions_spelling_fixed;     // >= 2.8 (approx.): "divisions" instead of "divisons"
  bool core_config_parser;           // >= 2.9: AcceleratorAllocatorConfig tokenizer and texts
  bool has_max_non_split_rounding;   // >= 2.5 (approx.): option max_non_split_rounding_mb
  bool has_large_segment_size;       // main: option large_segment_size_mb
  bool has_per_process_memory_fraction;  // >= 2.10 (approx.): option per_process_memory_fraction
  bool fraction_only_below_one;          // >= 2.10 (approx.): a fraction of 1.0 means "no limit"
  bool has_release_lock_on_cudamalloc;   // >= 2.3
  bool has_pinned_register_options;      // >= 2.2: pinned_use_cuda_host_register, ..._threads
  bool has_pinned_background_threads;    // >= 2.5
  bool has_pinned_reserve_segment;       // >= 2.8
  bool has_graph_capture_record_stream_reuse;  // >= 2.8
  OomTemplate oom_template;
  bool oom_docs_pytorch_org_url;  // >= 2.9 (approx.): docs.pytorch.org link in the OOM text
};

// The rule set of `version`.
VersionRules RulesFor(TorchVersion version);

enum class Backend { kNative, kCudaMallocAsync };

// One parsed allocator configuration. Defaults are PyTorch's. Every byte field is bytes.
struct AllocatorConfig {
  TorchVersion torch_version = kDefaultTorchVersion;
  std::string settings;  // the string as given (PyTorch's last_allocator_settings)
  Backend backend = Backend::kNative;
  std::int64_t max_split_size_bytes = kUnlimitedBytes;       // blocks >= this are "oversize"
  std::int64_t max_non_split_rounding_bytes = kLargeBuffer;  // oversize reuse tolerance
  std::array<std::int64_t, kRoundupIntervals> roundup_power2_divisions{};  // 0 = plain rounding
  double garbage_collection_threshold = 0.0;  // fraction of the allowed memory; 0 = off
  bool expandable_segments = false;
  std::int64_t large_segment_size_bytes =
      kLargeBuffer;                                   // main only: 1-10 MiB segment and large page
  std::optional<double> per_process_memory_fraction;  // 2.10+: as set_per_process_memory_fraction
  // Options accepted but without a modelled effect, one line each, e.g.
  // "release_lock_on_cudamalloc:True (lock handling only; no effect on memory)".
  std::vector<std::string> not_simulated;
  // Warnings PyTorch itself would print while parsing (TORCH_WARN).
  std::vector<std::string> warnings;

  // True when max_split_size_mb was given (PyTorch compares against SIZE_MAX).
  bool HasMaxSplitSize() const { return max_split_size_bytes != kUnlimitedBytes; }
  VersionRules rules() const { return RulesFor(torch_version); }
};

// Parses `settings` with the syntax, limits and error texts of `version`. An empty string
// gives the defaults. Errors: kInvalidConfig with `field` = the option name (or
// "alloc_conf" for syntax errors) and `message` = PyTorch's own text for the same input
// (trailing spaces dropped); `hint` names the offending value.
// Example: ParseAllocatorConfig("expandable_segments:True,max_split_size_mb:128", {2, 4}).
Result<AllocatorConfig> ParseAllocatorConfig(std::string_view settings,
                                             TorchVersion version = kDefaultTorchVersion);

}  // namespace memtune::alloc
