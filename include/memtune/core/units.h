// Byte quantities: parsing sizes with units and formatting them for people.
//
// Bytes are std::int64_t everywhere in memtune (signed, like PyTorch's Stat) and are
// converted only at I/O, with these functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "memtune/core/result.h"

namespace memtune {

inline constexpr std::int64_t kKiB = 1024;                // bytes
inline constexpr std::int64_t kMiB = 1024 * kKiB;         // bytes
inline constexpr std::int64_t kGiB = 1024 * kMiB;         // bytes
inline constexpr std::int64_t kTiB = 1024 * kGiB;         // bytes
inline constexpr std::int64_t kGB = 1000LL * 1000 * 1000;  // bytes (decimal)

// The largest device memory memtune models (1 PiB, far above any GPU): the limit on a job's
// gpu_memory_bytes and a measured case's bytes, the allocator simulator's largest capacity
// (its address model is sized so that expandable segments, which reserve 1.125 x capacity
// of addresses per stream and pool, fit for thousands of streams), and the capacity the
// forecast replays with when no GPU is given.
inline constexpr std::int64_t kMaxDeviceBytes = std::int64_t{1} << 50;

// Parses "123", "20MiB", "1.5 GiB", "80GB", "512k" into bytes.
// Binary units: KiB MiB GiB TiB, and the bare letters K M G T. Decimal units: kB MB GB TB.
// "B" or no unit = bytes.
// Fractional numbers are fine when the size is whole ("1.5GiB"). Case-insensitive on the unit.
// Errors: kInvalidInput naming `field` for an empty string, a non-number, a negative
// value, an unknown unit, a fraction of a byte ("1.5", "0.1KiB"), or a value above 2^62
// bytes (absurd for a GPU).
// Example: ParseBytes("20MiB", "--capacity") == 20971520.
Result<std::int64_t> ParseBytes(std::string_view text, std::string_view field);

// ParseBytes for a device's memory: also kInvalidInput naming `field` unless the size is
// 1 B to kMaxDeviceBytes. Example: ParseDeviceBytes("80GiB", "--capacity") == 85899345920.
Result<std::int64_t> ParseDeviceBytes(std::string_view text, std::string_view field);

// "58.80 GB (54.76 GiB)" style is left to reports; this gives binary units:
// 0 -> "0 B", 1536 -> "1.50 KiB", 20971520 -> "20.00 MiB".
std::string FormatBytesBinary(std::int64_t bytes);

// Decimal GB with two decimals, as Megatron's report_memory prints: 58800000000 -> "58.80 GB".
std::string FormatGB(std::int64_t bytes);

// Groups digits with commas: 70553706496 -> "70,553,706,496".
std::string FormatWithCommas(std::int64_t value);

}  // namespace memtune
