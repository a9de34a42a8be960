// StatsLedger operations other than Apply (which is inline in stats.h).
#include "memtune/alloc/stats.h"

namespace memtune::alloc {

void StatsLedger::ResetPeaks() {
  // PyTorch resetPeakStats(): every peak (arrays and the two oversize stats) becomes current.
  DeviceStats& s = stats_;
  for (StatArray* a :
       {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes,
        &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes}) {
    for (Stat& stat : *a) stat.peak = stat.current;
  }
  s.oversize_allocations.peak = s.oversize_allocations.current;
  s.oversize_segments.peak = s.oversize_segments.current;
}

}  // namespace memtune::alloc
