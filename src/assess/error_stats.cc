// Error statistics of a validation summary.
#include "assess/error_stats.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace memtune::assess::internal {

ErrorStats AbsoluteErrorStats(std::vector<double> e) {
  ErrorStats s;
  if (e.empty()) return s;
  std::sort(e.begin(), e.end());
  const std::size_t n = e.size();
  s.median = n % 2 ? e[n / 2] : (e[n / 2 - 1] + e[n / 2]) / 2;
  const auto rank90 = static_cast<std::size_t>(std::ceil(0.9 * static_cast<double>(n)));
  s.p90 = e[std::max<std::size_t>(rank90, 1) - 1];
  s.max = e.back();
  return s;
}

}  // namespace memtune::assess::internal
