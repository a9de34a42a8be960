// Hand-written scanners for sizes and numbers in log text.
#include "diagnose/text_scan.h"

#include <cctype>
#include <cmath>

namespace memtune::diagnose {
namespace {

constexpr std::size_t kMaxExcerptChars = 800;
constexpr std::size_t kMaxNumberChars = 32;  // longer digit runs are not sizes

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
char Lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

void SkipSpaces(std::string_view text, std::size_t& pos) {
  while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t')) ++pos;
}

}  // namespace

std::vector<Line> SplitLines(std::string_view text) {
  std::vector<Line> lines;
  std::size_t start = 0;
  int number = 1;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (end < text.size() || !line.empty()) lines.push_back({number, line});
    ++number;
    start = end + 1;
  }
  return lines;
}

std::string ToLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = Lower(c);
  return out;
}

std::size_t FindNoCase(std::string_view text, std::string_view needle, std::size_t from) {
  if (needle.empty() || needle.size() > text.size()) return std::string_view::npos;
  const char first_lower = Lower(needle[0]);
  const char first_upper = static_cast<char>(std::toupper(static_cast<unsigned char>(needle[0])));
  for (std::size_t i = from; i + needle.size() <= text.size(); ++i) {
    if (text[i] != first_lower && text[i] != first_upper) continue;
    std::size_t k = 1;
    while (k < needle.size() && Lower(text[i + k]) == Lower(needle[k])) ++k;
    if (k == needle.size()) return i;
  }
  return std::string_view::npos;
}

bool ContainsNoCase(std::string_view text, std::string_view needle) {
  return FindNoCase(text, needle) != std::string_view::npos;
}

std::optional<std::int64_t> UnitBytes(std::string_view unit) {
  struct Entry {
    const char* name;
    std::int64_t bytes;
  };
  static constexpr Entry kUnits[] = {
      {"bytes", 1},      {"byte", 1},        {"b", 1},          {"kib", 1LL << 10},
      {"kb", 1LL << 10}, {"mib", 1LL << 20}, {"mb", 1LL << 20}, {"gib", 1LL << 30},
      {"gb", 1LL << 30}, {"tib", 1LL << 40}, {"tb", 1LL << 40},
  };
  if (unit.size() > 5) return std::nullopt;
  std::string lower;
  for (char c : unit) lower += Lower(c);
  for (const Entry& e : kUnits) {
    if (lower == e.name) return e.bytes;
  }
  return std::nullopt;
}

std::optional<double> ScanNumber(std::string_view text, std::size_t& pos) {
  std::size_t p = pos;
  std::string digits;
  bool seen_dot = false;
  while (p < text.size() && digits.size() < kMaxNumberChars) {
    const char c = text[p];
    if (IsDigit(c)) {
      digits += c;
    } else if (c == '.' && !seen_dot && p + 1 < text.size() && IsDigit(text[p + 1]) &&
               !digits.empty()) {
      seen_dot = true;
      digits += c;
    } else if (c == ',' && !seen_dot && !digits.empty() && p + 3 < text.size() &&
               IsDigit(text[p + 1]) && IsDigit(text[p + 2]) && IsDigit(text[p + 3]) &&
               (p + 4 >= text.size() || !IsDigit(text[p + 4]))) {
      // thousands separator ("11,636"); "1,2" is a list, not a number
    } else {
      break;
    }
    ++p;
  }
  if (digits.empty() || digits.size() >= kMaxNumberChars) return std::nullopt;
  const double value = std::strtod(digits.c_str(), nullptr);
  if (!(value < kMaxNumber)) return std::nullopt;
  pos = p;
  return value;
}

std::optional<std::int64_t> ScanSize(std::string_view text, std::size_t& pos) {
  std::size_t p = pos;
  auto number = ScanNumber(text, p);
  if (!number) return std::nullopt;
  SkipSpaces(text, p);
  std::size_t unit_end = p;
  while (unit_end < text.size() && IsAlpha(text[unit_end]) && unit_end - p < 6) ++unit_end;
  auto unit = UnitBytes(text.substr(p, unit_end - p));
  if (!unit) return std::nullopt;
  auto bytes = ScaleBytes(number, *unit);
  if (!bytes) return std::nullopt;
  pos = unit_end;
  return bytes;
}

std::optional<std::int64_t> ScaleBytes(std::optional<double> value, std::int64_t unit_bytes) {
  constexpr double kMaxBytes = 9.0e18;  // below INT64_MAX (9.22e18)
  if (!value) return std::nullopt;
  const double bytes = *value * static_cast<double>(unit_bytes);
  if (!(bytes >= 0.0 && bytes < kMaxBytes)) return std::nullopt;
  return static_cast<std::int64_t>(std::llround(bytes));
}

std::optional<int> SmallInt(std::optional<double> value) {
  constexpr double kMaxSmallInt = 1e7;
  if (!value || !(*value >= 0.0 && *value < kMaxSmallInt)) return std::nullopt;
  return static_cast<int>(*value);
}

std::optional<std::int64_t> SizeAfter(std::string_view text, std::string_view key) {
  std::size_t pos = text.find(key);
  if (pos == std::string_view::npos) return std::nullopt;
  pos += key.size();
  SkipSpaces(text, pos);
  return ScanSize(text, pos);
}

std::optional<double> NumberAfter(std::string_view text, std::string_view key) {
  std::size_t pos = text.find(key);
  if (pos == std::string_view::npos) return std::nullopt;
  pos += key.size();
  SkipSpaces(text, pos);
  return ScanNumber(text, pos);
}

std::optional<std::int64_t> SizeBefore(std::string_view text, std::string_view key) {
  const std::size_t end = text.find(key);
  if (end == std::string_view::npos) return std::nullopt;
  // Walk back over spaces, the unit, spaces, and the number.
  std::size_t p = end;
  while (p > 0 && text[p - 1] == ' ') --p;
  while (p > 0 && IsAlpha(text[p - 1]) && end - p < 12) --p;
  while (p > 0 && text[p - 1] == ' ') --p;
  std::size_t start = p;
  while (start > 0 &&
         (IsDigit(text[start - 1]) || text[start - 1] == '.' || text[start - 1] == ',') &&
         p - start < kMaxNumberChars) {
    --start;
  }
  while (start < p && !IsDigit(text[start])) ++start;
  if (start == p) return std::nullopt;
  std::size_t pos = start;
  return ScanSize(text.substr(0, end), pos);
}

std::optional<int> RankOf(std::string_view line) {
  for (const char* key : {"[Rank ", "[rank ", "[Rank", "[rank"}) {
    std::size_t pos = line.find(key);
    if (pos == std::string_view::npos) continue;
    pos += std::string_view(key).size();
    if (pos < line.size() && IsDigit(line[pos])) {
      if (auto n = SmallInt(ScanNumber(line, pos))) return n;
    }
  }
  return std::nullopt;
}

std::string Excerpt(std::string_view line) {
  std::string_view cut = line.substr(0, kMaxExcerptChars);
  // Never end inside a UTF-8 sequence: drop trailing continuation bytes and their lead byte.
  if (cut.size() < line.size()) {
    while (!cut.empty() && (static_cast<unsigned char>(cut.back()) & 0xC0) == 0x80) {
      cut.remove_suffix(1);
    }
    if (!cut.empty() && static_cast<unsigned char>(cut.back()) >= 0xC0) cut.remove_suffix(1);
  }
  std::string out;
  for (char c : cut) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 && c != '\t') || u == 0x7f ? '?' : c;
  }
  return out;
}

}  // namespace memtune::diagnose
