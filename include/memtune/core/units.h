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

// Parses "123", "20MiB", "1.5 GiB", "80GB", "512k" into bytes.
// Binary units: KiB MiB GiB TiB, and the bare letters K M G T. Decimal units: kB MB GB TB.
// "B" or no unit = bytes.
// Fractional values are rounded to the nearest byte. Case-insensitive on the unit.
// Errors: kInvalidInput naming `field` for an empty string, a non-number, a negative
// value, an unknown unit, or a value above 2^62 bytes (absurd for a GPU).
// Example: ParseBytes("20MiB", "--capacity") == 20971520.
Result<std::int64_t> ParseBytes(std::string_view text, std::string_view field);

// "58.80 GB (54.76 GiB)" style is left to reports; this gives binary units:
// 0 -> "0 B", 1536 -> "1.50 KiB", 20971520 -> "20.00 MiB".
std::string FormatBytesBinary(std::int64_t bytes);

// Decimal GB with two decimals, as Megatron's report_memory prints: 58800000000 -> "58.80 GB".
std::string FormatGB(std::int64_t bytes);

// Groups digits with commas: 70553706496 -> "70,553,706,496".
std::string FormatWithCommas(std::int64_t value);

}  // namespace memtune
