// Release runs inside a malloc: an explicit torch.cuda.empty_cache() or the OOM-retry path
// (allocator.md 3.8). PyTorch's DeviceCachingAllocator::malloc gathers its context once and
// hands it to release_cached_blocks when cudaMalloc fails, so a retry release carries the
// stack of the malloc it serves (C++ frames: DeviceCachingAllocator::malloc); emptyCache
// gathers its own (C++ frames: emptyCache; Python: torch.cuda.empty_cache).
// PyTorch v2.x c10/cuda/CUDACachingAllocator.cpp: malloc(), emptyCache(), release_cached_blocks().
#include <algorithm>

#include "snapshot/replay_internal.h"

namespace memtune::snapshot {
namespace {

bool HasFrame(const Snapshot& s, StackId stack, bool (*match)(const Frame&)) {
  const auto& frames = s.stacks[static_cast<std::size_t>(stack)];
  return std::any_of(frames.begin(), frames.end(),
                     [&](std::int32_t f) { return match(s.frames[static_cast<std::size_t>(f)]); });
}

bool IsEmptyCacheFrame(const Frame& f) {
  return f.name.find("emptyCache") != std::string::npos || f.name == "empty_cache";
}

bool IsMallocFrame(const Frame& f) {
  return f.name.find("DeviceCachingAllocator::malloc") != std::string::npos;
}

bool SameFrames(const Snapshot& s, StackId a, StackId b) {
  const auto& fa = s.stacks[static_cast<std::size_t>(a)];
  const auto& fb = s.stacks[static_cast<std::size_t>(b)];
  if (fa.size() != fb.size()) return false;
  for (std::size_t i = 0; i < fa.size(); ++i) {
    const Frame& x = s.frames[static_cast<std::size_t>(fa[i])];
    const Frame& y = s.frames[static_cast<std::size_t>(fb[i])];
    if (x.name != y.name || x.filename != y.filename || x.line != y.line) return false;
  }
  return true;
}

bool ValidStack(const Snapshot& s, StackId id) {
  return id != kNoStack && id >= 0 && static_cast<std::size_t>(id) < s.stacks.size();
}

}  // namespace

ReleaseKind ClassifyRelease(const Snapshot& snapshot, const TraceEntry& release,
                            const TraceEntry& malloc) {
  if (!ValidStack(snapshot, release.stack)) return ReleaseKind::kUnknown;
  if (HasFrame(snapshot, release.stack, IsEmptyCacheFrame)) return ReleaseKind::kExplicit;
  if (HasFrame(snapshot, release.stack, IsMallocFrame)) return ReleaseKind::kOomRetry;
  if (!ValidStack(snapshot, malloc.stack)) return ReleaseKind::kUnknown;
  return SameFrames(snapshot, release.stack, malloc.stack) ? ReleaseKind::kOomRetry
                                                           : ReleaseKind::kExplicit;
}

RetryBound FindRetryBound(const Snapshot& snapshot, const std::vector<TraceEntry>& trace,
                          std::int64_t reserved_at_start) {
  RetryBound bound;
  std::int64_t reserved = reserved_at_start;
  std::size_t group_start = 0;  // first segment_* entry since the last malloc/free
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const TraceEntry& e = trace[i];
    if (IsRelease(e.action) || IsGrowth(e.action)) continue;
    const bool is_malloc = e.action == TraceAction::kAlloc || e.action == TraceAction::kOom;
    std::int64_t before = reserved;  // reserved when the group's first release happened
    const TraceEntry* first_release = nullptr;
    const TraceEntry* retried = nullptr;  // the segment the failed cudaMalloc asked for
    for (std::size_t k = group_start; k < i; ++k) {
      const TraceEntry& g = trace[k];
      if (IsRelease(g.action) && first_release == nullptr) {
        first_release = &g;
        before = reserved;
      }
      if (IsGrowth(g.action) && first_release != nullptr && retried == nullptr) retried = &g;
      reserved += IsRelease(g.action) ? -g.size_bytes : (IsGrowth(g.action) ? g.size_bytes : 0);
    }
    group_start = i + 1;
    if (!is_malloc || first_release == nullptr || retried == nullptr) continue;
    if (ClassifyRelease(snapshot, *first_release, e) != ReleaseKind::kOomRetry) continue;
    ++bound.retries;
    const std::int64_t upper = before + retried->size_bytes;
    if (bound.upper_bytes < 0 || upper < bound.upper_bytes) {
      bound.upper_bytes = upper;
      bound.event_index = static_cast<std::int64_t>(first_release - trace.data());
      bound.failed_segment_bytes = retried->size_bytes;
      bound.reserved_at_failure_bytes = before;
    }
  }
  return bound;
}

}  // namespace memtune::snapshot
