// Plain-text tables and number formatting for the catalog commands (models, gpus).
#pragma once

#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

namespace memtune::cli {

// Columns separated by two spaces; `right[i]` right-aligns column i (numbers). The first row
// is the header. Trailing spaces are trimmed.
inline std::string RenderTable(const std::vector<std::vector<std::string>>& rows,
                               const std::vector<bool>& right) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()), 0);
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      const std::string pad(width[i] - row[i].size(), ' ');
      const bool align_right = i < right.size() && right[i];
      line += (i == 0 ? "" : "  ") + (align_right ? pad + row[i] : row[i] + pad);
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  }
  return out;
}

// Shortest round-trip text of a double: 989.4 -> "989.4", 312 -> "312".
inline std::string FormatNumber(double value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

}  // namespace memtune::cli
