// Private helpers shared by the two allocator-config parsers: PyTorch's tokenizer and
// number conversions with the semantics of std::stoi / std::stoull / std::stod.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/alloc/config.h"
#include "memtune/core/result.h"

namespace memtune::alloc::internal {

// PyTorch's config tokenizer: ',' ':' '[' ']' are single-character tokens, everything else
// accumulates into words. Up to 2.8 only ' ' is dropped (CUDAAllocatorConfig::lexArgs);
// from 2.9 every isspace() character is (ConfigTokenizer).
std::vector<std::string> TokenizeAllocConf(std::string_view settings, bool drop_all_whitespace);

// Leading integer of `token` as std::stoi/stoull would read it (leading spaces, optional
// '+', digits, trailing junk ignored). nullopt when there is no digit, the value is negative,
// or it overflows `max_value`.
std::optional<std::uint64_t> ParseLeadingUnsigned(std::string_view token, std::uint64_t max_value);

// Leading floating-point number of `token` as std::stod reads it; nullopt if none.
std::optional<double> ParseLeadingDouble(std::string_view token);

// True for 1, 2, 4, ... (llvm::isPowerOf2_64: 0 is not a power of two).
inline bool IsPowerOfTwo(std::uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// floor(log2(v)) for v > 0.
int Log2Floor(std::uint64_t v);

// kInvalidConfig carrying PyTorch's text (trailing spaces removed) for option `field`.
Error ConfigError(std::string field, std::string pytorch_text, std::string hint = {});

// The error for a token that is not a number where PyTorch calls `function` (stoi...).
Error NumberError(const std::string& field, const std::string& token, const char* function);

// Applies a parsed roundup_power2_divisions list entry "K:V" (K in MiB, or ">").
// `first`, `last_index` carry PyTorch's state across entries.
void ApplyRoundupEntry(AllocatorConfig& cfg, bool is_gt, std::uint64_t interval_mb,
                       std::int64_t value, bool& first, int& last_index);

// Records an option that is accepted but has no modelled effect.
void NoteNotSimulated(AllocatorConfig& cfg, const std::string& key, const std::string& value);

// The TORCH_WARN PyTorch prints for backend:cudaMallocAsync with native-only options.
inline constexpr const char* kAsyncIgnoresWarning =
    "backend:cudaMallocAsync ignores max_split_size_mb,roundup_power2_divisions, and "
    "garbage_collect_threshold.";

// The two parser families (config_legacy.cc, config_core.cc).
Status ParseLegacy(const std::vector<std::string>& tokens, AllocatorConfig& cfg);
Status ParseCore(const std::vector<std::string>& tokens, AllocatorConfig& cfg);

}  // namespace memtune::alloc::internal
