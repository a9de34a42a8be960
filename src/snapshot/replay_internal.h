// Pieces of Replay shared by its files: the allocator state at the first trace entry
// (rebuilt from the final snapshot, allocator.md 10.3) and the recorded-address handle map.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "memtune/alloc/simulator.h"
#include "memtune/snapshot/replay.h"

namespace memtune::snapshot {

// One block of a segment at the first trace entry.
struct StartPiece {
  std::int64_t size_bytes = 0;
  bool live = false;  // an allocation made before the trace; else free
  std::int64_t requested_bytes = 0;
};

// One segment (native) or mapped run (expandable) at the first trace entry.
struct StartSegment {
  std::int64_t address = 0;
  std::int64_t size_bytes = 0;
  std::int64_t stream = 0;
  PoolType pool = PoolType::kLarge;
  bool expandable = false;
  std::vector<StartPiece> pieces;  // address order; sizes sum to size_bytes
};

struct StartState {
  std::vector<StartSegment> segments;  // address order
  std::vector<std::string> notes;
  // Most synthetic allocations BuildStart may make: proportional to the input (blocks and
  // trace entries), so a small hostile file cannot ask for unbounded work.
  std::int64_t work_budget = 0;
  bool empty() const { return segments.empty(); }
};

// Undoes `device`'s trace from the final segments to the state before its first entry.
// Blocks freed during the trace get round-to-512 sizes, widened to absorb a gap of at most
// 1 MiB behind them in a native large segment (allocator.md 5.3).
StartState RebuildStart(const Snapshot& snapshot, int device);

// Recorded address -> simulator handle, with handle reuse (Simulator wants small ids).
class HandleMap {
 public:
  alloc::HandleId Bind(std::int64_t address);
  // The handle of `address`, or -1.
  std::int64_t Find(std::int64_t address) const;
  void Release(std::int64_t address);
  // A handle bound to no address (synthetic allocations); give it back with Recycle.
  alloc::HandleId NewAnonymous();
  void Recycle(alloc::HandleId id) { free_ids_.push_back(id); }

 private:
  std::unordered_map<std::int64_t, alloc::HandleId> by_address_;
  std::vector<alloc::HandleId> free_ids_;
  alloc::HandleId next_ = 0;
};

// Who released cached segments right before a malloc (replay_retry.cc).
enum class ReleaseKind { kUnknown, kExplicit, kOomRetry };

// kOomRetry when `release` (a segment_free/unmap in the group that `malloc` closes) carries
// DeviceCachingAllocator::malloc frames or the malloc's own stack; kExplicit for emptyCache /
// torch.cuda.empty_cache frames or another stack; kUnknown when no stack was recorded.
ReleaseKind ClassifyRelease(const Snapshot& snapshot, const TraceEntry& release,
                            const TraceEntry& malloc);

// What the OOM-retry releases of a trace prove about the device: cudaMalloc of
// failed_segment_bytes failed with reserved_at_failure_bytes reserved, so the memory PyTorch
// could use is below upper_bytes (the smallest such sum over the trace).
struct RetryBound {
  std::int64_t retries = 0;       // retry releases classified by their frames
  std::int64_t upper_bytes = -1;  // exclusive; -1 = none
  std::int64_t event_index = -1;  // the first release of the tightest retry
  std::int64_t failed_segment_bytes = 0;
  std::int64_t reserved_at_failure_bytes = 0;
};
RetryBound FindRetryBound(const Snapshot& snapshot, const std::vector<TraceEntry>& trace,
                          std::int64_t reserved_at_start);

// Recreates `start` inside `sim` with synthetic allocations (addresses come from the
// simulator's address oracle, which the caller points at `next_segment_address`). Live
// pieces are bound in `handles` at their addresses. Returns notes on what could not be
// reproduced exactly.
std::vector<std::string> BuildStart(alloc::Simulator& sim, const StartState& start,
                                    HandleMap& handles, std::int64_t& next_segment_address);

// Trace actions that give memory back to the device, and that take more of it.
inline bool IsRelease(TraceAction a) {
  return a == TraceAction::kSegmentFree || a == TraceAction::kSegmentUnmap;
}
inline bool IsGrowth(TraceAction a) {
  return a == TraceAction::kSegmentAlloc || a == TraceAction::kSegmentMap;
}

}  // namespace memtune::snapshot
