// Parsing and formatting of byte quantities.
#include "memtune/core/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace memtune {
namespace {

constexpr double kMaxBytes = 4611686018427387904.0;  // 2^62 bytes: far above any device

struct Unit {
  const char* name;
  std::int64_t bytes;
};

// Lower-cased unit names. Bare K/M/G/T are binary, as in PyTorch's format_size output.
constexpr Unit kUnits[] = {
    {"", 1},       {"b", 1},        {"k", kKiB},   {"kib", kKiB},      {"m", kMiB},
    {"mib", kMiB}, {"g", kGiB},     {"gib", kGiB}, {"t", kTiB},        {"tib", kTiB},
    {"kb", 1000},  {"mb", 1000000}, {"gb", kGB},   {"tb", 1000 * kGB},
};

std::string Trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

Result<std::int64_t> ParseBytes(std::string_view text, std::string_view field) {
  const std::string s = Trim(text);
  const std::string where(field);
  if (s.empty()) return InvalidInput(where, "empty size; expected a number of bytes such as 20MiB");
  std::size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  const std::string number = s.substr(0, i);
  std::string unit = Trim(std::string_view(s).substr(i));
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (number.empty() || number == "." || number.find('.') != number.rfind('.')) {
    return InvalidInput(where, "'" + s +
                                   "' is not a size; expected a number with an optional unit (B, "
                                   "KiB, MiB, GiB, TiB, kB, MB, GB, TB)");
  }
  const Unit* found = nullptr;
  for (const auto& u : kUnits) {
    if (unit == u.name) found = &u;
  }
  if (found == nullptr) {
    return InvalidInput(where, "unknown unit '" + unit + "' in '" + s +
                                   "'; allowed: B, KiB, MiB, GiB, TiB, kB, MB, GB, TB");
  }
  const double value = std::strtod(number.c_str(), nullptr) * static_cast<double>(found->bytes);
  if (!(value <= kMaxBytes)) {
    return InvalidInput(where,
                        "'" + s + "' is too large; sizes above 2^62 bytes are not plausible");
  }
  const double whole = std::round(value);
  if (std::fabs(value - whole) > 1e-6 * std::max(1.0, whole)) {
    char bytes[64];
    std::snprintf(bytes, sizeof(bytes), "%.6g", value);
    return InvalidInput(where,
                        "'" + s + "' is " + bytes + " bytes; a size is a whole number of bytes");
  }
  return static_cast<std::int64_t>(whole);
}

Result<std::int64_t> ParseDeviceBytes(std::string_view text, std::string_view field) {
  MEMTUNE_TRY(const std::int64_t bytes, ParseBytes(text, field));
  if (bytes < 1 || bytes > kMaxDeviceBytes) {
    return InvalidInput(std::string(field),
                        std::string("'").append(text) +
                            "' must be positive and at most 1024 TiB, the largest device "
                            "memory memtune simulates");
  }
  return bytes;
}

std::string FormatBytesBinary(std::int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::fabs(v) >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  if (u == 0) {
    std::snprintf(buf, sizeof(buf), "%lld B", static_cast<long long>(bytes));
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f %s", v, units[u]);
  }
  return buf;
}

std::string FormatGB(std::int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f GB", static_cast<double>(bytes) / static_cast<double>(kGB));
  return buf;
}

std::string FormatWithCommas(std::int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  int count = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (count && count % 3 == 0) out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++count;
  }
  return value < 0 ? "-" + out : out;
}

}  // namespace memtune
