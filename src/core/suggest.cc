// Edit distance and "did you mean" suggestions.
#include "memtune/core/suggest.h"

#include <algorithm>

namespace memtune {

std::size_t EditDistanceAtMost(std::string_view a, std::string_view b, std::size_t bound) {
  // The lengths differ by at least that many insertions or deletions.
  const std::size_t gap = a.size() > b.size() ? a.size() - b.size() : b.size() - a.size();
  if (gap > bound) return bound + 1;
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    std::size_t row_min = row[0];
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      const std::size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
      row_min = std::min(row_min, row[j]);
      diagonal = above;
    }
    // A row's minimum never decreases further down: the distance is already past the bound.
    if (row_min > bound) return bound + 1;
  }
  return std::min(row[b.size()], bound + 1);
}

std::size_t EditDistance(std::string_view a, std::string_view b) {
  // No distance exceeds the longer length, so this bound never cuts the computation short.
  return EditDistanceAtMost(a, b, std::max(a.size(), b.size()));
}

std::string Suggest(std::string_view name, const std::vector<std::string>& candidates) {
  const std::size_t limit = std::max<std::size_t>(2, name.size() / 4);
  std::string best;
  std::size_t best_distance = limit + 1;
  for (const auto& candidate : candidates) {
    if (best_distance == 0) break;
    // Only a strictly closer candidate replaces the best (ties go to the earliest).
    const std::size_t d = EditDistanceAtMost(name, candidate, best_distance - 1);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

std::string DidYouMean(std::string_view name, const std::vector<std::string>& candidates) {
  const std::string best = Suggest(name, candidates);
  return best.empty() ? std::string() : "did you mean '" + best + "'?";
}

std::string JoinNames(const std::vector<std::string>& names, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i) out += sep;
    out += names[i];
  }
  return out;
}

}  // namespace memtune
