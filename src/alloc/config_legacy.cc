// The allocator-config parser of PyTorch 2.1-2.8 (CUDAAllocatorConfig::parseArgs with its
// own lexer): every option, default, limit and error text of that family.
// PyTorch v2.x c10/cuda/CUDAAllocatorConfig.cpp, parseArgs() and parse*() helpers.
#include <cstdint>
#include <limits>
#include <string>

#include "alloc/config_tokens.h"

namespace memtune::alloc::internal {
namespace {

constexpr std::uint64_t kStoiMax = std::numeric_limits<std::int32_t>::max();
constexpr std::uint64_t kStoullMax = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint64_t kMaxThreads = 128;  // CUDAAllocatorConfig::pinned_max_register_threads()

class LegacyParser {
 public:
  LegacyParser(const std::vector<std::string>& t, AllocatorConfig& cfg)
      : t_(t), cfg_(cfg), rules_(cfg.rules()) {}

  Status Run() {
    bool async = false, native_option = false;
    for (i_ = 0; i_ < t_.size(); ++i_) {
      const std::string key = t_[i_];
      MEMTUNE_RETURN_IF_ERROR(Option(key, async, native_option));
      if (i_ + 1 < t_.size()) MEMTUNE_RETURN_IF_ERROR(Expect(','));
    }
    if (async && native_option) cfg_.warnings.push_back(kAsyncIgnoresWarning);
    return OkStatus();
  }

 private:
  Status Option(const std::string& key, bool& async, bool& native_option) {
    native_option = native_option || key != "backend";
    if (key == "max_split_size_mb") return SplitSize(key, cfg_.max_split_size_bytes);
    if (key == "max_non_split_rounding_mb" && rules_.has_max_non_split_rounding) {
      return SplitSize(key, cfg_.max_non_split_rounding_bytes);
    }
    if (key == "garbage_collection_threshold") return GcThreshold();
    if (key == "roundup_power2_divisions") return Roundup();
    if (key == "backend") return BackendOption(async);
    if (key == "expandable_segments") return Bool(key, &cfg_.expandable_segments);
    if ((key == "release_lock_on_cudamalloc" || key == "release_lock_on_hipmalloc") &&
        rules_.has_release_lock_on_cudamalloc) {
      return Bool("release_lock_on_cudamalloc", nullptr, key);
    }
    if ((key == "pinned_use_cuda_host_register" || key == "pinned_use_hip_host_register") &&
        rules_.has_pinned_register_options) {
      return Bool("pinned_use_cuda_host_register", nullptr, key, true);
    }
    if (key == "pinned_num_register_threads" && rules_.has_pinned_register_options) {
      return RegisterThreads();
    }
    if (key == "pinned_reserve_segment_size_mb" && rules_.has_pinned_reserve_segment) {
      return ReserveSegment();
    }
    if (key == "pinned_use_background_threads" && rules_.has_pinned_background_threads) {
      return Bool(key, nullptr, key, true);
    }
    if (key == "graph_capture_record_stream_reuse" &&
        rules_.has_graph_capture_record_stream_reuse) {
      return Bool(key, nullptr, key, true);
    }
    return ConfigError(key, "Unrecognized CachingAllocator option: " + key);
  }

  Status Expect(char c) {
    ++i_;
    if (i_ < t_.size() && t_[i_] == std::string(1, c)) return OkStatus();
    return ConfigError("alloc_conf",
                       std::string("Error parsing CachingAllocator settings, expected ") + c,
                       i_ < t_.size() ? "got '" + t_[i_] + "'" : "reached the end");
  }

  // Moves to the value token; false when there is none.
  bool NextValue() { return ++i_ < t_.size(); }

  Result<std::uint64_t> Unsigned(const std::string& key, std::uint64_t max, const char* fn) {
    auto v = ParseLeadingUnsigned(t_[i_], max);
    if (!v) return NumberError(key, t_[i_], fn);
    return *v;
  }

  Status SplitSize(const std::string& key, std::int64_t& out) {
    MEMTUNE_RETURN_IF_ERROR(Expect(':'));
    if (!NextValue()) return ConfigError(key, "Error, expecting " + key + " value");
    MEMTUNE_TRY(std::uint64_t mb, Unsigned(key, kStoiMax, "stoi"));
    if (mb <= static_cast<std::uint64_t>(kLargeBuffer / kMiB)) {
      return ConfigError(key, "CachingAllocator option " + key + " too small, must be > 20",
                         "got " + t_[i_]);
    }
    out = static_cast<std::int64_t>(mb) * kMiB;
    return OkStatus();
  }

  Status GcThreshold() {
    const std::string key = "garbage_collection_threshold";
    MEMTUNE_RETURN_IF_ERROR(Expect(':'));
    if (!NextValue()) return ConfigError(key, "Error, expecting " + key + " value");
    auto v = ParseLeadingDouble(t_[i_]);
    if (!v) return NumberError(key, t_[i_], "stod");
    if (!(*v > 0))
      return ConfigError(key, "garbage_collect_threshold too small, set it 0.0~1.0",
                         "got " + t_[i_]);
    if (!(*v < 1.0))
      return ConfigError(key, "garbage_collect_threshold too big, set it 0.0~1.0", "got " + t_[i_]);
    cfg_.garbage_collection_threshold = *v;
    return OkStatus();
  }

  std::string DivisionsText(bool list) const {
    std::string text = rules_.divisions_spelling_fixed
                           ? "For roundups, the divisions has to be power of 2"
                           : "For roundups, the divisons has to be power of 2";
    if (list && rules_.roundup_list_accepts_zero) text += " or 0 to disable roundup";
    return text;
  }

  Status Roundup() {
    const std::string key = "roundup_power2_divisions";
    MEMTUNE_RETURN_IF_ERROR(Expect(':'));
    if (!NextValue()) return ConfigError(key, "Error, expecting " + key + " value");
    if (t_[i_] != "[") {
      MEMTUNE_TRY(std::uint64_t d, Unsigned(key, kStoiMax, "stoi"));
      if (!IsPowerOfTwo(d)) return ConfigError(key, DivisionsText(false), "got " + t_[i_]);
      cfg_.roundup_power2_divisions.fill(static_cast<std::int64_t>(d));
      return OkStatus();
    }
    bool first = true;
    int last_index = 0;
    while (++i_ < t_.size() && t_[i_] != "]") {
      const std::string interval = t_[i_];
      MEMTUNE_RETURN_IF_ERROR(Expect(':'));
      if (!NextValue()) return ConfigError(key, "Error parsing roundup_power2_divisions value");
      MEMTUNE_TRY(std::uint64_t d, Unsigned(key, kStoiMax, "stoi"));
      const bool zero_ok = rules_.roundup_list_accepts_zero && d == 0;
      if (!zero_ok && !IsPowerOfTwo(d))
        return ConfigError(key, DivisionsText(true), "got " + t_[i_]);
      std::uint64_t mb = 0;
      if (interval != ">") {
        auto v = ParseLeadingUnsigned(interval, kStoullMax);
        if (!v) return NumberError(key, interval, "stoul");
        if (!IsPowerOfTwo(*v)) {
          return ConfigError(key, "For roundups, the intervals have to be power of 2",
                             "got " + interval);
        }
        mb = *v;
      }
      ApplyRoundupEntry(cfg_, interval == ">", mb, static_cast<std::int64_t>(d), first, last_index);
      if (i_ + 1 >= t_.size() || t_[i_ + 1] != "]") MEMTUNE_RETURN_IF_ERROR(Expect(','));
    }
    return OkStatus();
  }

  Status BackendOption(bool& async) {
    MEMTUNE_RETURN_IF_ERROR(Expect(':'));
    if (!NextValue()) return ConfigError("backend", "Error parsing backend value");
    const std::string& v = t_[i_];
    if (v != "native" && v != "cudaMallocAsync") {
      return ConfigError("backend",
                         "Unknown allocator backend, options are native and cudaMallocAsync",
                         "got '" + v + "'");
    }
    async = v == "cudaMallocAsync";
    cfg_.backend = async ? Backend::kCudaMallocAsync : Backend::kNative;
    if (async) NoteNotSimulated(cfg_, "backend", v);
    return OkStatus();
  }

  // A True/False option; `out` null means "accepted, not simulated". `missing_text` selects
  // the options whose parser reports a missing value separately.
  Status Bool(const std::string& name, bool* out, const std::string& key = {},
              bool missing_text = false) {
    MEMTUNE_RETURN_IF_ERROR(Expect(':'));
    const bool have = NextValue();
    if (!have && missing_text) return ConfigError(name, "Error, expecting " + name + " value");
    if (!have || (t_[i_] != "True" && t_[i_] != "False")) {
      return ConfigError(name, "Expected a single True/False argument for " + name,
                         have ? "got '" + t_[i_] + "'" : "no value");
    }
    if (out != nullptr) {
      *out = t_[i_] == "True";
    } else {
      NoteNotSimulated(cfg_, key.empty() ? name : key, t_[i_]);
    }
    return OkStatus();
  }

  Status RegisterThreads() {
    const std::string key = "pinned_num_register_threads";
    MEMTUNE_RETURN_IF_ERROR(Expect(':'));
    if (!NextValue()) return ConfigError(key, "Error, expecting " + key + " value");
    MEMTUNE_TRY(std::uint64_t n, Unsigned(key, kStoiMax, "stoi"));
    if (!IsPowerOfTwo(n))
      return ConfigError(key, "Number of register threads has to be power of 2", "got " + t_[i_]);
    if (n > kMaxThreads) {
      return ConfigError(key, "Number of register threads should be less than or equal to 128",
                         "got " + t_[i_]);
    }
    NoteNotSimulated(cfg_, key, t_[i_]);
    return OkStatus();
  }

  Status ReserveSegment() {
    const std::string key = "pinned_reserve_segment_size_mb";
    MEMTUNE_RETURN_IF_ERROR(Expect(':'));
    if (!NextValue()) return ConfigError(key, "Error, expecting " + key + " value");
    MEMTUNE_TRY(std::uint64_t mb, Unsigned(key, kStoiMax, "stoi"));
    if (mb == 0)
      return ConfigError(key, "Pinned reserve segment size has to be greater than 0",
                         "got " + t_[i_]);
    NoteNotSimulated(cfg_, key, t_[i_]);
    return OkStatus();
  }

  const std::vector<std::string>& t_;
  AllocatorConfig& cfg_;
  VersionRules rules_;
  std::size_t i_ = 0;
};

}  // namespace

Status ParseLegacy(const std::vector<std::string>& tokens, AllocatorConfig& cfg) {
  return LegacyParser(tokens, cfg).Run();
}

}  // namespace memtune::alloc::internal
