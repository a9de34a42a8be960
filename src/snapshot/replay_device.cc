// DeviceReplayer: drives the simulator with one device trace (allocator.md 10.2). Every
// alloc/oom closes a group of the segment_* entries before it; a group holding releases
// is replayed as torch.cuda.empty_cache() before the malloc (an explicit call, or the
// OOM-retry release, which frees the same blocks), a release run before a free or at the
// end as an empty_cache of its own.
#include "snapshot/replay_device.h"

#include <cinttypes>
#include <cstdio>

#include "memtune/core/units.h"

namespace memtune::snapshot {
namespace {

// "No capacity limit": far above any GPU, yet small enough that expandable segments (whose
// address range is 1.125 x capacity) of many streams fit in the simulator's address model.
constexpr std::int64_t kUnlimitedBytes = std::int64_t{4} << 40;  // bytes (4 TiB)

TraceAction ActionOf(alloc::AllocatorEventKind k) {
  switch (k) {
    case alloc::AllocatorEventKind::kAlloc:
      return TraceAction::kAlloc;
    case alloc::AllocatorEventKind::kFreeRequested:
      return TraceAction::kFreeRequested;
    case alloc::AllocatorEventKind::kFreeCompleted:
      return TraceAction::kFreeCompleted;
    case alloc::AllocatorEventKind::kSegmentAlloc:
      return TraceAction::kSegmentAlloc;
    case alloc::AllocatorEventKind::kSegmentFree:
      return TraceAction::kSegmentFree;
    case alloc::AllocatorEventKind::kSegmentMap:
      return TraceAction::kSegmentMap;
    case alloc::AllocatorEventKind::kSegmentUnmap:
      return TraceAction::kSegmentUnmap;
    case alloc::AllocatorEventKind::kOom:
      return TraceAction::kOom;
  }
  return TraceAction::kOther;
}

alloc::SimulatorOptions SimOptions(const DeviceReplayerOptions& o, int device) {
  alloc::SimulatorOptions s;
  s.config = o.config;
  s.capacity_bytes = o.capacity_bytes.value_or(kUnlimitedBytes);
  s.device_index = device;
  s.pending_frees = alloc::PendingFreeCompletion::kExplicit;  // complete where the trace says
  return s;
}

}  // namespace

std::string DescribeEvent(TraceAction action, std::int64_t addr, std::int64_t size_bytes) {
  char hex[32];
  std::snprintf(hex, sizeof(hex), "0x%" PRIx64, static_cast<std::uint64_t>(addr));
  if (action == TraceAction::kOom) {
    return std::string("oom of ") + FormatBytesBinary(size_bytes) + " (device_free " +
           FormatBytesBinary(addr) + ")";
  }
  const std::string size = action == TraceAction::kAlloc || action == TraceAction::kFreeRequested ||
                                   action == TraceAction::kFreeCompleted
                               ? FormatWithCommas(size_bytes) + " B"
                               : FormatBytesBinary(size_bytes);
  return std::string(TraceActionName(action)) + " " + hex + " " + size;
}

DeviceReplayer::DeviceReplayer(const Snapshot& snapshot, int device, DeviceReplayerOptions options)
    : snapshot_(snapshot),
      trace_(snapshot.device_traces[static_cast<std::size_t>(device)]),
      options_(std::move(options)),
      sim_(SimOptions(options_, device)) {
  recorded_reserved_ = options_.recorded_reserved_at_start;
  const StartState start = RebuildStart(snapshot_, device);
  start_notes_ = start.notes;
  sim_.SetAddressOracle([this](const alloc::SegmentRequest& r) { return Oracle(r); });
  if (!start.empty()) {
    rebuilt_ = true;
    auto notes = BuildStart(sim_, start, handles_, build_address_);
    start_notes_.insert(start_notes_.end(), notes.begin(), notes.end());
  }
  sim_.ResetPeakStats();
  sim_.SetObserver([this](const alloc::AllocatorEvent& e) { OnEvent(e); });
}

void DeviceReplayer::OnEvent(const alloc::AllocatorEvent& e) { emitted_.push_back(e); }

std::optional<std::uint64_t> DeviceReplayer::Oracle(const alloc::SegmentRequest& request) {
  if (build_address_ >= 0) {
    const auto address = static_cast<std::uint64_t>(build_address_);
    build_address_ = -1;  // one segment per announced address
    return address;
  }
  if (!options_.verify) return std::nullopt;  // what-if: the built-in address model
  // Own settings: the address the recording chose for this new segment.
  const TraceAction want =
      request.expandable ? TraceAction::kSegmentMap : TraceAction::kSegmentAlloc;
  for (std::size_t k = request.expandable ? 0 : next_native_; k < group_.size(); ++k) {
    if (group_[k].entry->action != want) continue;
    if (request.expandable) {
      if (expandable_used_) return std::nullopt;
      expandable_used_ = true;
    } else {
      next_native_ = k + 1;
    }
    return static_cast<std::uint64_t>(group_[k].entry->addr);
  }
  return std::nullopt;
}

void DeviceReplayer::Compare(const std::vector<Recorded>& expected, std::size_t at,
                             DeviceReplay& out) {
  std::vector<alloc::AllocatorEvent> actual;
  actual.swap(emitted_);
  if (!options_.verify) return;
  const std::size_t n = std::max(expected.size(), actual.size());
  for (std::size_t k = 0; k < n; ++k) {
    ++out.compared_events;
    const bool have_e = k < expected.size(), have_a = k < actual.size();
    if (have_e && have_a) {
      const TraceEntry& e = *expected[k].entry;
      const alloc::AllocatorEvent& a = actual[k];
      if (e.action == ActionOf(a.kind) && e.addr == static_cast<std::int64_t>(a.address) &&
          e.size_bytes == a.size_bytes) {
        continue;
      }
    }
    ++out.mismatched_events;
    if (out.divergence) continue;
    Divergence d;
    d.event_index = static_cast<std::int64_t>(have_e ? expected[k].index : at);
    d.recorded = have_e ? DescribeEvent(expected[k].entry->action, expected[k].entry->addr,
                                        expected[k].entry->size_bytes)
                        : "nothing more";
    d.replayed =
        have_a ? DescribeEvent(ActionOf(actual[k].kind),
                               static_cast<std::int64_t>(actual[k].address), actual[k].size_bytes)
               : "nothing";
    out.divergence = d;
  }
}

}  // namespace memtune::snapshot
