// Median, nearest-rank p90 and maximum of absolute errors, for the validation summaries
// (memory cases and throughput cases alike). Private to assess.
#pragma once

#include <vector>

namespace memtune::assess::internal {

struct ErrorStats {
  double median = 0;
  double p90 = 0;  // nearest-rank 90th percentile
  double max = 0;
};

// All zero for no values.
ErrorStats AbsoluteErrorStats(std::vector<double> abs_errors);

}  // namespace memtune::assess::internal
