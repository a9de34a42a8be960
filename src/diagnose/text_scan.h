// Line splitting and size/number scanning shared by the diagnose text readers. Hand-written
// scanners (no std::regex): bounded work per byte, so any input is safe to read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memtune::diagnose {

// One line of an input: its 1-based number and its text without the line break.
struct Line {
  int number = 0;
  std::string_view text;
};

// Splits on '\n' (a trailing '\r' is dropped). The views point into `text`.
std::vector<Line> SplitLines(std::string_view text);

// `text` with ASCII letters in lower case.
std::string ToLower(std::string_view text);

// Position of `needle` in `text` ignoring ASCII case, or npos. For many needles on one line,
// lower the line once (ToLower) and search it instead.
std::size_t FindNoCase(std::string_view text, std::string_view needle, std::size_t from = 0);
bool ContainsNoCase(std::string_view text, std::string_view needle);

// Bytes per unit for a size unit as logs print them ("bytes", "B", "KiB", "KB", "MiB", "MB",
// "GiB", "GB", "TiB", "TB"; case-insensitive). KB/MB/GB are binary: PyTorch, Megatron,
// DeepSpeed and torchtitan all divide by powers of 1024 before printing them.
std::optional<std::int64_t> UnitBytes(std::string_view unit);

// Numbers at or above this are not read (no size, index or pid in a log is that large), so
// that every value converts to an integer without overflow.
inline constexpr double kMaxNumber = 1e15;

// A decimal number at text[pos] ("12", "12.34", "1,234.5"), below kMaxNumber; advances pos
// past it.
std::optional<double> ScanNumber(std::string_view text, std::size_t& pos);

// A size at text[pos]: a number, optional spaces, a unit; advances pos past it. Bytes are
// rounded to the nearest integer.
std::optional<std::int64_t> ScanSize(std::string_view text, std::size_t& pos);

// The size that starts right after the first `key` (spaces skipped), or nullopt.
std::optional<std::int64_t> SizeAfter(std::string_view text, std::string_view key);
// The number right after the first `key` (spaces skipped), or nullopt.
std::optional<double> NumberAfter(std::string_view text, std::string_view key);
// The size that ends right before the first `key` ("28.82 GiB already allocated").
std::optional<std::int64_t> SizeBefore(std::string_view text, std::string_view key);

// value x unit_bytes rounded, or nullopt when it does not fit an int64 (or value is negative).
std::optional<std::int64_t> ScaleBytes(std::optional<double> value, std::int64_t unit_bytes);

// A device index, rank or column number: nullopt unless 0 <= value < 1e7.
std::optional<int> SmallInt(std::optional<double> value);

// The rank a line names: "[Rank 3]", "[rank3]:", "[rank 3]"; nullopt when none.
std::optional<int> RankOf(std::string_view line);

// A short copy of a line for evidence: at most 800 characters, control bytes shown as '?'.
std::string Excerpt(std::string_view line);

}  // namespace memtune::diagnose
