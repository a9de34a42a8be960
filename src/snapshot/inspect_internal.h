// Pieces of Inspect shared by its files: allocation-site grouping and the trace summary.
#pragma once

#include <map>
#include <vector>

#include "memtune/snapshot/inspect.h"

namespace memtune::snapshot {

// Sums bytes and counts of allocations per site (the innermost `depth` frames of a stack).
class SiteTable {
 public:
  SiteTable(const Snapshot& snapshot, int depth) : snapshot_(snapshot), depth_(depth) {}

  void Add(StackId stack, std::int64_t bytes);
  // The `n` sites with the most bytes (ties: more allocations, then frame order).
  std::vector<SiteUsage> Top(int n) const;

 private:
  struct Totals {
    std::int64_t bytes = 0;
    std::int64_t count = 0;
  };
  const Snapshot& snapshot_;
  int depth_;
  std::map<StackId, Totals> by_stack_;  // folded into sites (frame-index keys) by Top()
};

// Fills dev.trace from snapshot.device_traces[device]. Errors: kInvalidInput when the
// trace and the final segments cannot both be right (reserved bytes below zero).
Status SummarizeTrace(const Snapshot& snapshot, int device, const InspectOptions& options,
                      DeviceInspect& dev);

}  // namespace memtune::snapshot
