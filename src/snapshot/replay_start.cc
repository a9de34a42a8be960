// RebuildStart: the allocator state before the first trace entry, by undoing the trace from
// the final snapshot, as PyTorch's memory_viz "Allocator State History" does
// (torch/utils/viz/MemoryViz.js; docs/allocator.md 8.9 and 10.3).
#include <algorithm>
#include <iterator>
#include <map>

#include "memtune/alloc/constants.h"
#include "snapshot/replay_internal.h"

namespace memtune::snapshot {
namespace {

constexpr std::int64_t kBlockAlign = alloc::kMinBlockSize;   // bytes
constexpr std::int64_t kSplitRemainder = alloc::kSmallSize;  // bytes; large native split rule
constexpr std::int64_t kLargePage = alloc::kLargeBuffer;     // bytes; large expandable page
constexpr std::int64_t kBaseWorkBudget = 4096;               // synthetic allocations
constexpr std::int64_t kWorkPerInputItem = 8;                // per block or trace entry

struct Range {
  std::int64_t size_bytes = 0;
  std::int64_t stream = 0;
  PoolType pool = PoolType::kLarge;
  bool expandable = false;
};

struct LiveBlock {
  std::int64_t size_bytes = 0;
  std::int64_t requested_bytes = 0;
  bool estimated = false;      // freed during the trace: size from the request, not the snapshot
  std::size_t first_free = 0;  // estimated: trace index of the block's first free
};

class Undo {
 public:
  Undo(const Snapshot& snapshot, int device);
  void Run(const std::vector<TraceEntry>& trace);
  StartState Finish();

 private:
  void Unmap(const TraceEntry& e);  // undo segment_map: cut the range out of its run
  void Remap(const TraceEntry& e);  // undo segment_unmap: put the range back, merge
  void WidenEstimates();
  // The end of the estimated block at `address` as the trace bounds it: the lowest address
  // in [`from`, `limit`) allocated before the block's first free, else `limit`.
  std::int64_t TraceBoundary(const LiveBlock& b, std::int64_t from, std::int64_t limit) const;

  std::map<std::int64_t, Range> segments_;  // address -> native segment or mapped run
  std::map<std::int64_t, LiveBlock> live_;
  std::map<std::int64_t, std::size_t> first_alloc_;  // address -> trace index of its first alloc
  StartState out_;
};

Undo::Undo(const Snapshot& snapshot, int device) {
  for (const Segment& seg : snapshot.segments) {
    if (seg.device != device) continue;
    if (seg.pool_id != std::pair<std::int64_t, std::int64_t>{0, 0}) {
      out_.notes.push_back(
          "private-pool segments (CUDA graphs, MemPool) are not simulated; skipped");
      continue;
    }
    segments_[seg.address] =
        Range{seg.total_size_bytes, seg.stream, seg.segment_type, seg.is_expandable};
    for (const Block& b : seg.blocks) {
      if (b.state != BlockState::kInactive)
        live_[b.address] = LiveBlock{b.size_bytes, b.requested_bytes, false};
    }
  }
}

void Undo::Run(const std::vector<TraceEntry>& trace) {
  for (std::size_t i = trace.size(); i-- > 0;) {
    const TraceEntry& e = trace[i];
    switch (e.action) {
      case TraceAction::kAlloc:
        live_.erase(e.addr);
        first_alloc_[e.addr] = i;  // walking backwards: the last write is the first alloc
        break;
      case TraceAction::kFreeRequested:
      case TraceAction::kFreeCompleted: {
        const std::int64_t size =
            std::max(kBlockAlign, (e.size_bytes + kBlockAlign - 1) / kBlockAlign * kBlockAlign);
        auto [block, fresh] = live_.try_emplace(e.addr, LiveBlock{size, e.size_bytes, true, i});
        if (!fresh && block->second.estimated) block->second.first_free = i;
        break;
      }
      case TraceAction::kSegmentAlloc:
        segments_.erase(e.addr);
        break;
      case TraceAction::kSegmentFree: {
        const PoolType pool =
            e.size_bytes <= alloc::kSmallBuffer ? PoolType::kSmall : PoolType::kLarge;
        segments_[e.addr] = Range{e.size_bytes, e.stream, pool, false};
        break;
      }
      case TraceAction::kSegmentMap:
        Unmap(e);
        break;
      case TraceAction::kSegmentUnmap:
        Remap(e);
        break;
      default:
        break;
    }
  }
}

void Undo::Unmap(const TraceEntry& e) {
  auto it = segments_.upper_bound(e.addr);
  if (it == segments_.begin()) return;
  --it;
  const std::int64_t start = it->first, end = it->first + it->second.size_bytes;
  if (e.addr >= end) return;
  const Range r = it->second;
  segments_.erase(it);
  if (e.addr > start) segments_[start] = Range{e.addr - start, r.stream, r.pool, true};
  const std::int64_t cut_end = e.addr + e.size_bytes;
  if (cut_end < end) segments_[cut_end] = Range{end - cut_end, r.stream, r.pool, true};
}

void Undo::Remap(const TraceEntry& e) {
  PoolType pool = e.size_bytes % kLargePage == 0 ? PoolType::kLarge : PoolType::kSmall;
  std::int64_t start = e.addr, size = e.size_bytes;
  auto next = segments_.find(e.addr + e.size_bytes);
  if (next != segments_.end() && next->second.expandable && next->second.stream == e.stream) {
    pool = next->second.pool;
    size += next->second.size_bytes;
    segments_.erase(next);
  }
  auto prev = segments_.lower_bound(e.addr);
  if (prev != segments_.begin()) {
    --prev;
    if (prev->second.expandable && prev->second.stream == e.stream &&
        prev->first + prev->second.size_bytes == e.addr) {
      pool = prev->second.pool;
      start = prev->first;
      size += prev->second.size_bytes;
      segments_.erase(prev);
    }
  }
  segments_[start] = Range{size, e.stream, pool, true};
}

std::int64_t Undo::TraceBoundary(const LiveBlock& b, std::int64_t from, std::int64_t limit) const {
  for (auto it = first_alloc_.lower_bound(from); it != first_alloc_.end() && it->first < limit;
       ++it) {
    if (it->second < b.first_free) return it->first;
  }
  return limit;
}

// A native large block is never followed by a free remainder of <= 1 MiB (allocator.md 5.3):
// such a gap belongs to the block. The gap ends at the next live block, the segment end, or
// an address the trace allocates while the block is still live (a native alloc takes the
// low end of a free block, so a block starts there).
void Undo::WidenEstimates() {
  for (auto it = live_.begin(); it != live_.end(); ++it) {
    if (!it->second.estimated) continue;
    auto seg = segments_.upper_bound(it->first);
    if (seg == segments_.begin()) continue;
    --seg;
    if (seg->second.expandable || seg->second.pool != PoolType::kLarge) continue;
    const std::int64_t seg_end = seg->first + seg->second.size_bytes;
    auto next = std::next(it);
    const std::int64_t end = it->first + it->second.size_bytes;
    const std::int64_t live_limit =
        next != live_.end() && next->first < seg_end ? next->first : seg_end;
    const std::int64_t scan_end = std::min(live_limit, end + kSplitRemainder + 1);
    const std::int64_t boundary = TraceBoundary(it->second, end, scan_end);
    const std::int64_t gap = (boundary < scan_end ? boundary : live_limit) - end;
    if (gap > 0 && gap <= kSplitRemainder) it->second.size_bytes += gap;
  }
}

StartState Undo::Finish() {
  WidenEstimates();
  std::int64_t dropped = 0;
  auto block = live_.begin();
  for (const auto& [address, r] : segments_) {
    StartSegment seg{address, r.size_bytes, r.stream, r.pool, r.expandable, {}};
    std::int64_t at = address;
    const std::int64_t end = address + r.size_bytes;
    for (; block != live_.end() && block->first < end; ++block) {
      const std::int64_t b_end = block->first + block->second.size_bytes;
      if (block->first < at || b_end > end) {
        ++dropped;  // outside its segment or overlapping another block: inconsistent input
        continue;
      }
      if (block->first > at) seg.pieces.push_back(StartPiece{block->first - at, false, 0});
      seg.pieces.push_back(
          StartPiece{block->second.size_bytes, true, block->second.requested_bytes});
      at = b_end;
    }
    if (at < end) seg.pieces.push_back(StartPiece{end - at, false, 0});
    out_.segments.push_back(std::move(seg));
  }
  for (; block != live_.end(); ++block) ++dropped;
  if (dropped > 0) {
    out_.notes.push_back(std::to_string(dropped) +
                         " live block(s) outside any rebuilt segment were ignored");
  }
  std::sort(out_.notes.begin(), out_.notes.end());
  out_.notes.erase(std::unique(out_.notes.begin(), out_.notes.end()), out_.notes.end());
  return std::move(out_);
}

}  // namespace

StartState RebuildStart(const Snapshot& snapshot, int device) {
  const auto& trace = snapshot.device_traces[static_cast<std::size_t>(device)];
  Undo undo(snapshot, device);
  undo.Run(trace);
  StartState start = undo.Finish();
  std::int64_t items = static_cast<std::int64_t>(trace.size());
  for (const Segment& seg : snapshot.segments) {
    if (seg.device == device) items += 1 + static_cast<std::int64_t>(seg.blocks.size());
  }
  start.work_budget = kBaseWorkBudget + kWorkPerInputItem * items;
  return start;
}

alloc::HandleId HandleMap::NewAnonymous() {
  if (free_ids_.empty()) return next_++;
  const alloc::HandleId id = free_ids_.back();
  free_ids_.pop_back();
  return id;
}

alloc::HandleId HandleMap::Bind(std::int64_t address) {
  const alloc::HandleId id = NewAnonymous();
  auto [it, fresh] = by_address_.try_emplace(address, id);
  if (!fresh) it->second = id;  // the old allocation was never freed; its id stays taken
  return id;
}

std::int64_t HandleMap::Find(std::int64_t address) const {
  auto it = by_address_.find(address);
  return it == by_address_.end() ? -1 : static_cast<std::int64_t>(it->second);
}

void HandleMap::Release(std::int64_t address) {
  auto it = by_address_.find(address);
  if (it == by_address_.end()) return;
  free_ids_.push_back(it->second);
  by_address_.erase(it);
}

}  // namespace memtune::snapshot
