// Inspect, part 2: reserved and live bytes over a device trace, their peaks, what was live
// at the peak, and the OOMs. Reserved(t) = reserved_at_start + sum of segment_* deltas,
// with reserved_at_start = final reserved - net trace change (allocator.md 8.5). Live bytes
// follow alloc / free_requested like PyTorch's memory_viz "Active Memory Timeline" (8.9):
// allocations freed before being allocated in the trace, and final live blocks never
// allocated in it, predate the trace.
#include <unordered_map>
#include <unordered_set>

#include "snapshot/inspect_internal.h"
#include "snapshot/snapshot_fields.h"

namespace memtune::snapshot {
namespace {

constexpr std::int64_t kMaxRunningBytes = std::int64_t{1} << 62;  // far from int64 overflow

struct Live {
  std::int64_t size_bytes = 0;
  StackId stack = kNoStack;
};

bool IsSegmentGrowth(TraceAction a) {
  return a == TraceAction::kSegmentAlloc || a == TraceAction::kSegmentMap;
}
bool IsSegmentRelease(TraceAction a) {
  return a == TraceAction::kSegmentFree || a == TraceAction::kSegmentUnmap;
}

class TraceWalk {
 public:
  TraceWalk(const Snapshot& snapshot, int device)
      : snapshot_(snapshot), device_(device), trace_(snapshot.device_traces[device]) {}

  Status FirstPass(TraceSummary& out);
  void FinalLiveBlocks(TraceSummary& out) const;
  std::unordered_map<std::int64_t, Live> LiveAt(std::int64_t last_index) const;

  std::int64_t net_reserved = 0;
  std::int64_t net_requested = 0;

 private:
  Status Check(std::size_t i, std::int64_t value) const {
    if (value > -kMaxRunningBytes && value < kMaxRunningBytes) return OkStatus();
    return InvalidInput("device_traces[" + std::to_string(device_) + "][" + std::to_string(i) + "]",
                        "running byte totals exceed 2^62; the trace is inconsistent");
  }

  const Snapshot& snapshot_;
  int device_;
  const std::vector<TraceEntry>& trace_;
  std::unordered_map<std::int64_t, Live> live_;
  std::unordered_set<std::int64_t> allocated_in_trace_;
  std::vector<std::pair<std::int64_t, Live>> preexisting_;  // freed before allocated
};

// Applies a free_requested (completed == false) or free_completed to `live`. A
// free_completed only matters when no free_requested preceded it (PyTorch 2.0's "free").
// A free_requested of an unknown address is an allocation made before the trace started;
// it is appended to `preexisting` when that is not null.
void ApplyFree(std::unordered_map<std::int64_t, Live>& live, const TraceEntry& e, bool completed,
               std::int64_t& requested, std::vector<std::pair<std::int64_t, Live>>* preexisting) {
  auto it = live.find(e.addr);
  if (it != live.end()) {
    requested -= it->second.size_bytes;
    live.erase(it);
  } else if (!completed) {
    // free_requested of an allocation made before the trace started.
    requested -= e.size_bytes;
    if (preexisting != nullptr) preexisting->push_back({e.addr, Live{e.size_bytes, e.stack}});
  }
}

Status TraceWalk::FirstPass(TraceSummary& out) {
  std::int64_t peak_reserved = 0, peak_requested = 0;
  for (std::size_t i = 0; i < trace_.size(); ++i) {
    const TraceEntry& e = trace_[i];
    if (e.time_us >= 0) {
      if (out.first_time_us < 0) out.first_time_us = e.time_us;
      out.last_time_us = e.time_us;
    }
    if (IsSegmentGrowth(e.action)) net_reserved += e.size_bytes;
    if (IsSegmentRelease(e.action)) net_reserved -= e.size_bytes;
    switch (e.action) {
      case TraceAction::kAlloc: {
        auto [it, fresh] = live_.try_emplace(e.addr, Live{e.size_bytes, e.stack});
        if (!fresh) {
          net_requested -= it->second.size_bytes;  // an unrecorded free: replace
          it->second = Live{e.size_bytes, e.stack};
        }
        allocated_in_trace_.insert(e.addr);
        net_requested += e.size_bytes;
        break;
      }
      case TraceAction::kFreeRequested:
        ApplyFree(live_, e, false, net_requested, &preexisting_);
        break;
      case TraceAction::kFreeCompleted:
        ApplyFree(live_, e, true, net_requested, &preexisting_);
        break;
      case TraceAction::kOom: {
        OomEvent oom;
        oom.event_index = static_cast<std::int64_t>(i);
        oom.size_bytes = e.size_bytes;
        oom.device_free_bytes = e.addr;
        oom.stream = e.stream;
        oom.time_us = e.time_us;
        oom.reserved_bytes = net_reserved;  // made absolute once the start is known
        oom.requested_bytes = net_requested;
        out.ooms.push_back(oom);
        break;
      }
      default:
        break;
    }
    MEMTUNE_RETURN_IF_ERROR(Check(i, net_reserved));
    MEMTUNE_RETURN_IF_ERROR(Check(i, net_requested));
    if (net_reserved > peak_reserved) {
      peak_reserved = net_reserved;
      out.peak_reserved_event = static_cast<std::int64_t>(i);
    }
    if (net_requested > peak_requested) {
      peak_requested = net_requested;
      out.peak_requested_event = static_cast<std::int64_t>(i);
    }
  }
  out.peak_reserved_bytes = peak_reserved;
  out.peak_requested_bytes = peak_requested;
  return OkStatus();
}

// Requested bytes live before the first entry: allocations freed before being allocated in
// the trace, plus final live blocks never allocated in it.
void TraceWalk::FinalLiveBlocks(TraceSummary& out) const {
  std::int64_t before = 0;
  for (const auto& [addr, live] : preexisting_) before += live.size_bytes;
  for (const Segment& seg : snapshot_.segments) {
    if (seg.device != device_) continue;
    for (const Block& b : seg.blocks) {
      if (b.state == BlockState::kActiveAllocated && !allocated_in_trace_.contains(b.address)) {
        before += b.requested_bytes;
      }
    }
  }
  out.requested_at_start_bytes = before;
}

// The allocations live after entry `last_index` (-1: before the first entry).
std::unordered_map<std::int64_t, Live> TraceWalk::LiveAt(std::int64_t last_index) const {
  std::unordered_map<std::int64_t, Live> live;
  for (const auto& [addr, l] : preexisting_) live.emplace(addr, l);
  for (const Segment& seg : snapshot_.segments) {
    if (seg.device != device_) continue;
    for (const Block& b : seg.blocks) {
      if (b.state == BlockState::kActiveAllocated && !allocated_in_trace_.contains(b.address)) {
        live.emplace(b.address, Live{b.requested_bytes, b.stack});
      }
    }
  }
  std::int64_t unused = 0;
  for (std::int64_t i = 0; i <= last_index; ++i) {
    const TraceEntry& e = trace_[static_cast<std::size_t>(i)];
    if (e.action == TraceAction::kAlloc) live[e.addr] = Live{e.size_bytes, e.stack};
    if (e.action == TraceAction::kFreeRequested) ApplyFree(live, e, false, unused, nullptr);
    if (e.action == TraceAction::kFreeCompleted) ApplyFree(live, e, true, unused, nullptr);
  }
  return live;
}

}  // namespace

Status SummarizeTrace(const Snapshot& snapshot, int device, const InspectOptions& options,
                      DeviceInspect& dev) {
  TraceSummary& out = dev.trace;
  TraceWalk walk(snapshot, device);
  out.present = true;
  out.entries = static_cast<std::int64_t>(snapshot.device_traces[device].size());
  MEMTUNE_RETURN_IF_ERROR(walk.FirstPass(out));
  walk.FinalLiveBlocks(out);
  out.reserved_at_start_bytes = dev.reserved_bytes - walk.net_reserved;
  if (out.reserved_at_start_bytes < 0) {
    dev.notes.push_back("the trace releases " + std::to_string(-out.reserved_at_start_bytes) +
                        " bytes more than it reserves, beyond what the final segments hold; "
                        "reserved-over-time figures assume 0 at the start");
    out.reserved_at_start_bytes = 0;
  }
  out.starts_mid_run = out.reserved_at_start_bytes > 0 || out.requested_at_start_bytes > 0;
  out.peak_reserved_bytes += out.reserved_at_start_bytes;
  out.peak_requested_bytes += out.requested_at_start_bytes;
  for (OomEvent& oom : out.ooms) {
    oom.reserved_bytes += out.reserved_at_start_bytes;
    oom.requested_bytes += out.requested_at_start_bytes;
  }
  SiteTable sites(snapshot, options.frames_depth);
  for (const auto& [addr, live] : walk.LiveAt(out.peak_requested_event)) {
    sites.Add(live.stack, live.size_bytes);
  }
  out.live_at_peak = sites.Top(options.top_sites);
  return OkStatus();
}

}  // namespace memtune::snapshot
