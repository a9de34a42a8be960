// DeviceReplayer, part 2: the trace walk (mallocs, frees, release runs) and outcomes.
#include <algorithm>

#include "memtune/alloc/policy.h"
#include "snapshot/replay_device.h"
#include "snapshot/replay_internal.h"

namespace memtune::snapshot {
namespace {}  // namespace

// A release inside a malloc's group is the OOM-retry path (allocator.md 3.8) when its frames
// say so (replay_retry.cc), when the recorded malloc then failed, or when its first new
// segment did not fit the capacity.
bool DeviceReplayer::IsRetryRelease(const TraceEntry& ending) const {
  if (ending.action == TraceAction::kOom) return true;
  for (const Recorded& r : group_) {
    if (!IsRelease(r.entry->action)) continue;
    const ReleaseKind kind = ClassifyRelease(snapshot_, *r.entry, ending);
    if (kind != ReleaseKind::kUnknown) return kind == ReleaseKind::kOomRetry;
    break;
  }
  if (!options_.capacity_bytes) return false;
  for (const Recorded& r : group_) {
    if (IsGrowth(r.entry->action))
      return recorded_reserved_ + r.entry->size_bytes > *options_.capacity_bytes;
  }
  return false;
}

void DeviceReplayer::FlushReleases(std::size_t i, DeviceReplay& out) {
  if (group_.empty()) return;
  std::vector<Recorded> expected;
  for (const Recorded& r : group_) {
    if (IsRelease(r.entry->action)) {
      recorded_reserved_ -= r.entry->size_bytes;
    } else {
      recorded_reserved_ += r.entry->size_bytes;
    }
    expected.push_back(r);
  }
  sim_.EmptyCache();
  ++out.empty_caches;
  Compare(expected, i, out);
  group_.clear();
}

void DeviceReplayer::Malloc(std::size_t i, DeviceReplay& out) {
  const TraceEntry& e = trace_[i];
  std::vector<Recorded> expected;
  const bool has_release = std::any_of(
      group_.begin(), group_.end(), [](const Recorded& r) { return IsRelease(r.entry->action); });
  // Own settings: releases are replayed as empty_cache either way (same blocks, same
  // order). What-if: only explicit calls are replayed; the OOM-retry path is the
  // simulator's own business under the other configuration.
  if (has_release && (options_.verify || !IsRetryRelease(e))) {
    std::vector<Recorded> releases;
    for (const Recorded& r : group_) {
      if (IsRelease(r.entry->action)) releases.push_back(r);
    }
    sim_.EmptyCache();
    ++out.empty_caches;
    Compare(releases, i, out);
  }
  for (const Recorded& r : group_) {
    recorded_reserved_ += IsRelease(r.entry->action) ? -r.entry->size_bytes : r.entry->size_bytes;
    if (!IsRelease(r.entry->action) || !has_release) expected.push_back(r);
  }
  expected.push_back(Recorded{i, &e});
  ++out.mallocs;
  const auto stream = static_cast<alloc::StreamId>(e.stream);
  if (e.action == TraceAction::kAlloc) {
    const alloc::HandleId h = handles_.Bind(e.addr);
    if (sim_.Alloc(h, e.size_bytes, stream).status == alloc::AllocStatus::kOutOfMemory) {
      handles_.Release(e.addr);
      NoteOom(i, alloc::RoundSize(e.size_bytes, options_.config), out);
    }
  } else {
    const alloc::HandleId h = handles_.NewAnonymous();
    if (sim_.Alloc(h, e.size_bytes, stream).status == alloc::AllocStatus::kOutOfMemory) {
      NoteOom(i, alloc::RoundSize(e.size_bytes, options_.config), out);
    } else {
      sim_.Free(h);  // the program never got this memory; it stays cached
    }
    handles_.Recycle(h);
  }
  if (e.action == TraceAction::kOom) {
    const auto& s = sim_.stats();
    recorded_oom_unallocated =
        alloc::All(s.reserved_bytes).current - alloc::All(s.allocated_bytes).current;
  }
  group_.clear();
  next_native_ = 0;
  expandable_used_ = false;
  Compare(expected, i, out);
}

void DeviceReplayer::NoteOom(std::size_t i, std::int64_t rounded, DeviceReplay& out) {
  ReplayOutcome& o = out.replayed;
  ++o.ooms;
  if (o.oom) return;
  o.oom = true;
  o.oom_event_index = static_cast<std::int64_t>(i);
  o.oom_request_bytes = rounded;
  const auto& s = sim_.stats();
  o.oom_reserved_unallocated_bytes =
      alloc::All(s.reserved_bytes).current - alloc::All(s.allocated_bytes).current;
  o.oom_message = sim_.LastOomMessage();
}

void DeviceReplayer::FreeRequested(std::size_t i, DeviceReplay& out) {
  const TraceEntry& e = trace_[i];
  FlushReleases(i, out);
  ++out.frees;
  const std::int64_t h = handles_.Find(e.addr);
  std::vector<Recorded> expected{Recorded{i, &e}};
  if (h < 0) {
    emitted_.clear();  // an allocation the replay does not know (it failed, or predates the trace)
    return;
  }
  const auto handle = static_cast<alloc::HandleId>(h);
  const bool completes_now = i + 1 < trace_.size() &&
                             trace_[i + 1].action == TraceAction::kFreeCompleted &&
                             trace_[i + 1].addr == e.addr;
  if (!completes_now) {
    // Freed while record_stream events were pending (allocator.md 3.14): make the block
    // pending so that it completes at the recorded free_completed.
    sim_.RecordStream(handle, static_cast<alloc::StreamId>(e.stream) + 1);
  }
  sim_.Free(handle);
  if (completes_now) {
    expected.push_back(Recorded{i + 1, &trace_[i + 1]});
    handles_.Release(e.addr);
  }
  Compare(expected, i, out);
}

void DeviceReplayer::FreeCompleted(std::size_t i, DeviceReplay& out) {
  const TraceEntry& e = trace_[i];
  FlushReleases(i, out);
  const std::int64_t h = handles_.Find(e.addr);
  if (h < 0) {
    emitted_.clear();
    return;
  }
  const auto handle = static_cast<alloc::HandleId>(h);
  std::vector<Recorded> expected{Recorded{i, &e}};
  if (sim_.FreeCompleted(handle) == alloc::FreeStatus::kNotPending) {
    // PyTorch 2.0 wrote one "free" entry; or the free_requested predates the trace.
    sim_.Free(handle);
    ++out.frees;
    emitted_.erase(std::remove_if(emitted_.begin(), emitted_.end(),
                                  [](const alloc::AllocatorEvent& a) {
                                    return a.kind == alloc::AllocatorEventKind::kFreeRequested;
                                  }),
                   emitted_.end());
  }
  handles_.Release(e.addr);
  Compare(expected, i, out);
}

void DeviceReplayer::Run(DeviceReplay& out) {
  out.rebuilt_start = rebuilt_;
  out.notes.insert(out.notes.end(), start_notes_.begin(), start_notes_.end());
  for (std::size_t i = 0; i < trace_.size(); ++i) {
    const TraceEntry& e = trace_[i];
    ++out.events;
    switch (e.action) {
      case TraceAction::kSegmentAlloc:
      case TraceAction::kSegmentFree:
      case TraceAction::kSegmentMap:
      case TraceAction::kSegmentUnmap:
        group_.push_back(Recorded{i, &e});
        break;
      case TraceAction::kAlloc:
      case TraceAction::kOom:
        Malloc(i, out);
        break;
      case TraceAction::kFreeRequested:
        FreeRequested(i, out);
        break;
      case TraceAction::kFreeCompleted:
        FreeCompleted(i, out);
        break;
      default:
        break;
    }
  }
  FlushReleases(trace_.size(), out);
  const auto& s = sim_.stats();
  out.replayed.peak_reserved_bytes = alloc::All(s.reserved_bytes).peak;
  out.replayed.peak_allocated_bytes = alloc::All(s.allocated_bytes).peak;
  out.replayed.final_reserved_bytes = alloc::All(s.reserved_bytes).current;
}

}  // namespace memtune::snapshot
