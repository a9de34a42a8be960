// Replay on minimal synthetic snapshots shaped like the real findings of
// ../shared/docs/real-snapshots.md: frees of pre-trace blocks report the recorded request
// (F1), the trace bounds the widening of a pre-trace block (F2), OOM-retry releases are told
// from explicit empty_cache() calls and bound the capacity (F3).
#include <gtest/gtest.h>

#include "memtune/core/units.h"
#include "memtune/snapshot/replay.h"

namespace memtune::snapshot {
namespace {

constexpr std::int64_t kBase = std::int64_t{0x7f0000000000};

Segment FreeSegment(std::int64_t address, std::int64_t bytes) {
  Segment seg;
  seg.address = address;
  seg.total_size_bytes = bytes;
  Block free_block;
  free_block.address = address;
  free_block.size_bytes = bytes;
  seg.blocks.push_back(free_block);
  return seg;
}

TraceEntry Entry(TraceAction action, std::int64_t addr, std::int64_t bytes,
                 StackId stack = kNoStack) {
  TraceEntry e;
  e.action = action;
  e.addr = addr;
  e.size_bytes = bytes;
  e.stack = stack;
  return e;
}

// Appends a free_requested + free_completed pair.
void Free(std::vector<TraceEntry>& trace, std::int64_t addr, std::int64_t bytes) {
  trace.push_back(Entry(TraceAction::kFreeRequested, addr, bytes));
  trace.push_back(Entry(TraceAction::kFreeCompleted, addr, bytes));
}

DeviceReplay ReplayOne(const Snapshot& snap, ReplayOptions options = {}) {
  auto report = Replay(snap, options);
  EXPECT_TRUE(report) << report.error().Describe();
  if (!report || report->devices.empty()) return {};
  return report->devices[0];
}

// F1: a block allocated before the trace, request 3,000,000 B (block 3,000,320 B).
TEST(ReplayFixesTest, PreTraceFreeReportsTheRecordedRequest) {
  Snapshot snap;
  snap.segments.push_back(FreeSegment(kBase, 20 * kMiB));
  snap.device_traces.resize(1);
  Free(snap.device_traces[0], kBase, 3'000'000);
  const DeviceReplay d = ReplayOne(snap);
  EXPECT_TRUE(d.rebuilt_start);
  EXPECT_FALSE(d.divergence.has_value())
      << d.divergence->recorded << " vs " << d.divergence->replayed;
  EXPECT_EQ(d.mismatched_events, 0);
}

// F2: the pre-trace block at kBase (request 4 MiB) took a free block of 4 MiB + 983,040 B
// whole; the trace allocates at its end while it is live, which fixes the boundary.
TEST(ReplayFixesTest, InTraceAllocBoundsThePreTraceBlock) {
  const std::int64_t boundary = kBase + 4 * kMiB + 983'040;
  Snapshot snap;
  snap.segments.push_back(FreeSegment(kBase, 64 * kMiB));
  snap.device_traces.resize(1);
  auto& trace = snap.device_traces[0];
  trace.push_back(Entry(TraceAction::kAlloc, boundary, 8 * kMiB));
  Free(trace, boundary, 8 * kMiB);
  Free(trace, kBase, 4 * kMiB);
  const DeviceReplay d = ReplayOne(snap);
  EXPECT_FALSE(d.divergence.has_value())
      << d.divergence->recorded << " vs " << d.divergence->replayed;
  EXPECT_EQ(d.mismatched_events, 0);
  EXPECT_EQ(d.compared_events, 5);
}

// A trace from empty: a 2 GiB block is cached, then a 3 GiB malloc releases it before its
// cudaMalloc. `release_frame` names the release's innermost frame ("" = no stack recorded).
Snapshot ReleaseBeforeMalloc(const std::string& release_frame) {
  Snapshot snap;
  snap.frames.push_back(Frame{"forward", "model.py", 10});
  snap.stacks.push_back({0});
  StackId release_stack = kNoStack;
  if (!release_frame.empty()) {
    snap.frames.push_back(Frame{release_frame, "CUDACachingAllocator.cpp", 1});
    snap.stacks.push_back({1, 0});
    release_stack = 1;
  }
  const std::int64_t a = kBase, c = kBase + 4 * kGiB;
  snap.segments.push_back(FreeSegment(c, 3 * kGiB));
  snap.segments[0].blocks[0].state = BlockState::kActiveAllocated;
  snap.segments[0].blocks[0].requested_bytes = 3 * kGiB;
  snap.device_traces.resize(1);
  auto& trace = snap.device_traces[0];
  trace.push_back(Entry(TraceAction::kSegmentAlloc, a, 2 * kGiB, 0));
  trace.push_back(Entry(TraceAction::kAlloc, a, 2 * kGiB, 0));
  Free(trace, a, 2 * kGiB);
  trace.push_back(Entry(TraceAction::kSegmentFree, a, 2 * kGiB, release_stack));
  trace.push_back(Entry(TraceAction::kSegmentAlloc, c, 3 * kGiB, 0));
  trace.push_back(Entry(TraceAction::kAlloc, c, 3 * kGiB, 0));
  return snap;
}

ReplayOptions Expandable() {
  ReplayOptions o;
  o.alloc_conf = "expandable_segments:True";
  return o;
}

TEST(ReplayFixesTest, RetryReleaseBoundsTheCapacity) {
  const Snapshot snap = ReleaseBeforeMalloc(
      "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc");
  const DeviceReplay own = ReplayOne(snap);
  EXPECT_FALSE(own.divergence.has_value())
      << own.divergence->recorded << " vs " << own.divergence->replayed;
  ASSERT_TRUE(own.capacity_bytes.has_value());
  EXPECT_EQ(*own.capacity_bytes, 5 * kGiB - 1);  // cudaMalloc of 3 GiB failed at 2 GiB reserved
  EXPECT_EQ(own.capacity_lower_bound_bytes, 3 * kGiB);
  EXPECT_NE(own.capacity_source.find("OOM-retry release at entry 4"), std::string::npos)
      << own.capacity_source;

  const DeviceReplay what_if = ReplayOne(snap, Expandable());
  EXPECT_EQ(what_if.capacity_bytes, 5 * kGiB - 1);
  EXPECT_FALSE(what_if.replayed.oom);
}

TEST(ReplayFixesTest, SameStackAsTheMallocIsARetry) {
  Snapshot snap = ReleaseBeforeMalloc("");
  snap.device_traces[0][4].stack = 0;  // Python frames only: the malloc's own context
  EXPECT_EQ(ReplayOne(snap).capacity_bytes, 5 * kGiB - 1);
}

TEST(ReplayFixesTest, ExplicitEmptyCacheProvesNoCapacity) {
  const DeviceReplay d = ReplayOne(ReleaseBeforeMalloc(
      "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::emptyCache"));
  EXPECT_FALSE(d.capacity_bytes.has_value());
  EXPECT_EQ(d.capacity_source, "unlimited");
  const DeviceReplay what_if = ReplayOne(ReleaseBeforeMalloc("empty_cache"), Expandable());
  EXPECT_FALSE(what_if.capacity_bytes.has_value());
}

TEST(ReplayFixesTest, ReleaseWithoutStacksProvesNoCapacity) {
  EXPECT_FALSE(ReplayOne(ReleaseBeforeMalloc("")).capacity_bytes.has_value());
}

}  // namespace
}  // namespace memtune::snapshot
