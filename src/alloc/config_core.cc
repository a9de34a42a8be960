// The allocator-config parser of PyTorch 2.9+: AcceleratorAllocatorConfig::parseArgs (the
// device-generic options) followed by the CUDA hook CUDAAllocatorConfig::parseArgs (the
// CUDA-only options and the unknown-key check). Note that ConfigTokenizer::checkToken's
// result is ignored upstream, so a wrong separator is not an error in this family.
// PyTorch c10/core/AllocatorConfig.{h,cpp} and c10/cuda/CUDAAllocatorConfig.cpp (2.9+).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <string>

#include "alloc/config_tokens.h"

namespace memtune::alloc::internal {
namespace {

constexpr std::uint64_t kStoullMax = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint64_t kMaxThreads = 128;  // CUDAAllocatorConfig::pinned_max_register_threads()
constexpr std::uint64_t kMinLargeSegmentMb = 10;  // large_segment_size_mb must be > 10

class CoreParser {
 public:
  CoreParser(const std::vector<std::string>& t, AllocatorConfig& cfg)
      : t_(t), cfg_(cfg), rules_(cfg.rules()) {}

  Status Run() {
    if (rules_.has_large_segment_size) MEMTUNE_RETURN_IF_ERROR(LargeSegmentPrepass());
    cfg_.max_non_split_rounding_bytes = cfg_.large_segment_size_bytes;
    for (i_ = 0; i_ < t_.size(); ++i_) {
      MEMTUNE_RETURN_IF_ERROR(CoreOption(t_[i_]));
      if (i_ + 1 < t_.size()) ++i_;  // checkToken(",") result is ignored upstream
    }
    bool async = false, native_option = false;
    for (i_ = 0; i_ < t_.size(); ++i_) {
      MEMTUNE_RETURN_IF_ERROR(CudaOption(t_[i_], async, native_option));
      if (i_ + 1 < t_.size()) ++i_;
    }
    if (async && native_option) cfg_.warnings.push_back(kAsyncIgnoresWarning);
    return OkStatus();
  }

 private:
  std::set<std::string> CoreKeys() const {
    std::set<std::string> keys = {
        "max_split_size_mb",        "max_non_split_rounding_mb", "garbage_collection_threshold",
        "roundup_power2_divisions", "expandable_segments",       "pinned_use_background_threads"};
    if (rules_.has_large_segment_size) keys.insert("large_segment_size_mb");
    return keys;
  }

  Status Index(std::size_t i) const {
    if (i < t_.size()) return OkStatus();
    return ConfigError("alloc_conf", "Index out of bounds in ConfigTokenizer",
                       "the setting ends early");
  }

  // checkToken(++i, ":") then ++i onto the value; only the bounds are checked upstream.
  Status ToValue() {
    MEMTUNE_RETURN_IF_ERROR(Index(++i_));
    return Index(++i_);
  }

  Result<std::uint64_t> SizeT(const std::string& key, std::size_t at) {
    MEMTUNE_RETURN_IF_ERROR(Index(at));
    auto v = ParseLeadingUnsigned(t_[at], kStoullMax);
    if (!v) return NumberError(key, t_[at], "stoull");
    return *v;
  }

  Result<bool> Bool(const std::string& key, std::size_t at) {
    MEMTUNE_RETURN_IF_ERROR(Index(at));
    if (t_[at] == "True") return true;
    if (t_[at] == "False") return false;
    return ConfigError(key, "Expected 'True' or 'False' at index " + std::to_string(at) +
                                " in ConfigTokenizer but got '" + t_[at] + "'");
  }

  // ConfigTokenizer::skipKey: returns at the value, or at the ']' closing a list value.
  Status SkipKey() {
    MEMTUNE_RETURN_IF_ERROR(ToValue());
    if (t_[i_] != "[") return OkStatus();
    while (++i_ < t_.size() && t_[i_] != "]") {
    }
    if (i_ < t_.size()) return OkStatus();
    return ConfigError("alloc_conf",
                       "Expected closing bracket ']' in ConfigTokenizer but reached end of config");
  }

  Status LargeSegmentPrepass() {
    for (std::size_t k = 0; k + 2 < t_.size(); ++k) {
      if (t_[k] != "large_segment_size_mb") continue;
      MEMTUNE_TRY(std::uint64_t mb, SizeT("large_segment_size_mb", k + 2));
      if (mb <= kMinLargeSegmentMb) {
        return ConfigError("large_segment_size_mb", "large_segment_size_mb must be > 10 MB",
                           "got " + t_[k + 2]);
      }
      cfg_.large_segment_size_bytes = static_cast<std::int64_t>(mb) * kMiB;
    }
    return OkStatus();
  }

  Status SplitSize(const std::string& key, std::int64_t& out) {
    MEMTUNE_RETURN_IF_ERROR(Index(++i_));
    MEMTUNE_TRY(std::uint64_t mb, SizeT(key, ++i_));
    const std::uint64_t min_mb = static_cast<std::uint64_t>(cfg_.large_segment_size_bytes / kMiB);
    if (mb < min_mb) {
      return ConfigError(
          key,
          "CachingAllocator option " + key + " too small, must be >= " + std::to_string(min_mb),
          "got " + t_[i_]);
    }
    const std::uint64_t max_mb = static_cast<std::uint64_t>(kUnlimitedBytes / kMiB);
    out = static_cast<std::int64_t>(std::min(mb, max_mb)) * kMiB;
    return OkStatus();
  }

  Status Roundup() {
    const std::string key = "roundup_power2_divisions";
    MEMTUNE_RETURN_IF_ERROR(Index(++i_));
    MEMTUNE_RETURN_IF_ERROR(Index(++i_));
    const std::string zero_text =
        "For roundups, the divisions has to be power of 2 or 0 to disable roundup";
    if (t_[i_] != "[") {
      MEMTUNE_TRY(std::uint64_t d, SizeT(key, i_));
      if (!IsPowerOfTwo(d))
        return ConfigError(key, "For roundups, the divisions has to be power of 2",
                           "got " + t_[i_]);
      cfg_.roundup_power2_divisions.fill(static_cast<std::int64_t>(d));
      return OkStatus();
    }
    bool first = true;
    int last_index = 0;
    while (++i_ < t_.size() && t_[i_] != "]") {
      const std::size_t interval_at = i_;
      MEMTUNE_RETURN_IF_ERROR(Index(++i_));
      MEMTUNE_TRY(std::uint64_t d, SizeT(key, ++i_));
      if (d != 0 && !IsPowerOfTwo(d)) return ConfigError(key, zero_text, "got " + t_[i_]);
      std::uint64_t mb = 0;
      const bool is_gt = t_[interval_at] == ">";
      if (!is_gt) {
        MEMTUNE_TRY(mb, SizeT(key, interval_at));
        if (!IsPowerOfTwo(mb)) {
          return ConfigError(key, "For roundups, the intervals have to be power of 2",
                             "got " + t_[interval_at]);
        }
      }
      ApplyRoundupEntry(cfg_, is_gt, mb, static_cast<std::int64_t>(d), first, last_index);
      MEMTUNE_RETURN_IF_ERROR(Index(i_ + 1));
      if (t_[i_ + 1] != "]") ++i_;
    }
    if (i_ < t_.size()) return OkStatus();
    return ConfigError(key,
                       "Expected closing bracket ']' in ConfigTokenizer but reached end of config");
  }

  Status CoreOption(const std::string& key) {
    if (key == "max_split_size_mb") return SplitSize(key, cfg_.max_split_size_bytes);
    if (key == "max_non_split_rounding_mb")
      return SplitSize(key, cfg_.max_non_split_rounding_bytes);
    if (key == "roundup_power2_divisions") return Roundup();
    if (key == "garbage_collection_threshold") {
      MEMTUNE_RETURN_IF_ERROR(ToValue());
      auto v = ParseLeadingDouble(t_[i_]);
      if (!v) return NumberError(key, t_[i_], "stod");
      if (!(*v > 0 && *v < 1.0)) {
        return ConfigError(key, "garbage_collect_threshold is invalid, set it in (0.0, 1.0)",
                           "got " + t_[i_]);
      }
      cfg_.garbage_collection_threshold = *v;
      return OkStatus();
    }
    if (key == "expandable_segments") {
      MEMTUNE_RETURN_IF_ERROR(Index(++i_));
      MEMTUNE_TRY(cfg_.expandable_segments, Bool(key, ++i_));
      return OkStatus();
    }
    if (key == "pinned_use_background_threads") {
      MEMTUNE_RETURN_IF_ERROR(Index(++i_));
      MEMTUNE_TRY(bool value, Bool(key, ++i_));
      NoteNotSimulated(cfg_, key, value ? "True" : "False");
      return OkStatus();
    }
    return SkipKey();  // large_segment_size_mb was handled by the prepass
  }

  Status CudaBool(const std::string& key) {
    MEMTUNE_RETURN_IF_ERROR(Index(++i_));
    MEMTUNE_TRY(bool value, Bool(key, ++i_));
    NoteNotSimulated(cfg_, key, value ? "True" : "False");
    return OkStatus();
  }

  Status CudaOption(const std::string& key, bool& async, bool& native_option) {
    if (key == "backend") {
      MEMTUNE_RETURN_IF_ERROR(ToValue());
      if (t_[i_] != "native" && t_[i_] != "cudaMallocAsync") {
        return ConfigError(key, "Unknown allocator backend, options are native and cudaMallocAsync",
                           "got '" + t_[i_] + "'");
      }
      async = t_[i_] == "cudaMallocAsync";
      cfg_.backend = async ? Backend::kCudaMallocAsync : Backend::kNative;
      if (async) NoteNotSimulated(cfg_, key, t_[i_]);
      return OkStatus();
    }
    if (key == "release_lock_on_cudamalloc" || key == "release_lock_on_hipmalloc" ||
        key == "pinned_use_cuda_host_register" || key == "pinned_use_hip_host_register" ||
        key == "graph_capture_record_stream_reuse") {
      native_option = true;
      return CudaBool(key);
    }
    if (key == "pinned_num_register_threads") return RegisterThreads(key, native_option);
    if (key == "pinned_reserve_segment_size_mb") {
      native_option = true;
      MEMTUNE_RETURN_IF_ERROR(Index(++i_));
      MEMTUNE_TRY(std::uint64_t mb, SizeT(key, ++i_));
      if (mb == 0)
        return ConfigError(key, "Pinned reserve segment size has to be greater than 0",
                           "got " + t_[i_]);
      NoteNotSimulated(cfg_, key, t_[i_]);
      return OkStatus();
    }
    if (key == "per_process_memory_fraction" && rules_.has_per_process_memory_fraction) {
      MEMTUNE_RETURN_IF_ERROR(ToValue());
      auto v = ParseLeadingDouble(t_[i_]);
      if (!v) return NumberError(key, t_[i_], "stod");
      if (!(*v >= 0.0 && *v <= 1.0)) {
        return ConfigError(key, "per_process_memory_fraction is invalid, set it in [0.0, 1.0]",
                           "got " + t_[i_]);
      }
      cfg_.per_process_memory_fraction = *v;
      return OkStatus();
    }
    if (CoreKeys().count(key) == 0) {
      return ConfigError(key, "Unrecognized key '" + key + "' in CUDA allocator config.");
    }
    return SkipKey();
  }

  Status RegisterThreads(const std::string& key, bool& native_option) {
    native_option = true;
    MEMTUNE_RETURN_IF_ERROR(Index(++i_));
    MEMTUNE_TRY(std::uint64_t n, SizeT(key, ++i_));
    if (!IsPowerOfTwo(n)) {
      return ConfigError(key, "Number of register threads has to be power of 2, got " + t_[i_]);
    }
    if (n > kMaxThreads) {
      return ConfigError(
          key, "Number of register threads should be less than or equal to 128, got " + t_[i_]);
    }
    NoteNotSimulated(cfg_, key, t_[i_]);
    return OkStatus();
  }

  const std::vector<std::string>& t_;
  AllocatorConfig& cfg_;
  VersionRules rules_;
  std::size_t i_ = 0;
};

}  // namespace

Status ParseCore(const std::vector<std::string>& tokens, AllocatorConfig& cfg) {
  return CoreParser(tokens, cfg).Run();
}

}  // namespace memtune::alloc::internal
