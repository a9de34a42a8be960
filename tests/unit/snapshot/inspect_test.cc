// Inspect on the hand-checked snapshots (tests/data/snapshots/make_snapshots.py says how
// each number follows from the allocator rules).
#include "memtune/snapshot/inspect.h"

#include <gtest/gtest.h>

#include "memtune/core/units.h"
#include "snapshot/pickle_test_util.h"

namespace memtune::snapshot {
namespace {

using testing_util::DataPath;

DeviceInspect InspectFile(const std::string& name, InspectOptions options = {}) {
  auto snap = LoadSnapshotFile(DataPath(name));
  EXPECT_TRUE(snap) << snap.error().Describe();
  if (!snap) return {};
  auto report = Inspect(*snap, options);
  EXPECT_TRUE(report) << report.error().Describe();
  if (!report || report->devices.empty()) return {};
  return report->devices[0];
}

TEST(InspectTest, Example1NativeState) {
  const DeviceInspect d = InspectFile("example1_native.pickle");
  EXPECT_EQ(d.reserved_bytes, 200 * kMiB);
  EXPECT_EQ(d.allocated_bytes, 160 * kMiB);
  EXPECT_EQ(d.inactive_split_bytes, 40 * kMiB);
  EXPECT_EQ(d.inactive_split_blocks, 1);
  EXPECT_EQ(d.largest_free_block_bytes, 40 * kMiB);
  EXPECT_EQ(d.reserved_unallocated_bytes, 40 * kMiB);
  EXPECT_DOUBLE_EQ(d.fragmentation, 0.0);
  ASSERT_EQ(d.pools.size(), 1u);
  EXPECT_EQ(d.pools[0].segments, 2);
  ASSERT_EQ(d.top_sites.size(), 2u);
  EXPECT_EQ(d.top_sites[0].bytes, 100 * kMiB);
  EXPECT_EQ(d.top_sites[0].frames[0].name, "step");
}

TEST(InspectTest, Example1NativeTrace) {
  const TraceSummary t = InspectFile("example1_native.pickle").trace;
  EXPECT_TRUE(t.present);
  EXPECT_FALSE(t.starts_mid_run);
  EXPECT_EQ(t.peak_reserved_bytes, 200 * kMiB);
  EXPECT_EQ(t.peak_reserved_event, 5);
  EXPECT_EQ(t.peak_requested_bytes, 160 * kMiB);
  EXPECT_EQ(t.peak_requested_event, 6);
  EXPECT_TRUE(t.ooms.empty());
}

TEST(InspectTest, ExpandableFragmentation) {
  const DeviceInspect d = InspectFile("example2_expandable.pickle");
  EXPECT_EQ(d.reserved_bytes, 62 * kMiB);
  EXPECT_EQ(d.inactive_split_bytes, 0);  // PyTorch ignores expandable blocks here
  EXPECT_EQ(d.largest_free_block_bytes, 7339520);
  EXPECT_EQ(d.reserved_unallocated_bytes, 62 * kMiB - (1024 + 31457792 + 18 * kMiB));
  EXPECT_NEAR(d.fragmentation, 1.0 - 7339520.0 / static_cast<double>(d.reserved_unallocated_bytes), 1e-12);
  ASSERT_EQ(d.pools.size(), 2u);
  EXPECT_TRUE(d.pools[0].expandable);
}

TEST(InspectTest, MidRunTraceCountsWhatCameBefore) {
  const TraceSummary t = InspectFile("midrun_native.pickle").trace;
  EXPECT_TRUE(t.starts_mid_run);
  EXPECT_EQ(t.reserved_at_start_bytes, 54 * kMiB);
  EXPECT_EQ(t.requested_at_start_bytes, 5 * kMiB + 1000);  // A (freed in the trace) and x
  EXPECT_EQ(t.peak_requested_bytes, 48 * kMiB + 1001);
  EXPECT_EQ(t.peak_requested_event, 3);
}

TEST(InspectTest, OomAndLiveAtPeak) {
  const TraceSummary t = InspectFile("oom_native.pickle", {.frames_depth = 1, .top_sites = 1}).trace;
  ASSERT_EQ(t.ooms.size(), 1u);
  EXPECT_EQ(t.ooms[0].event_index, 7);
  EXPECT_EQ(t.ooms[0].size_bytes, 380 * kMiB);
  EXPECT_EQ(t.ooms[0].device_free_bytes, 200 * kMiB);
  EXPECT_EQ(t.ooms[0].reserved_bytes, 800 * kMiB);
  EXPECT_EQ(t.ooms[0].requested_bytes, 450 * kMiB);
  ASSERT_EQ(t.live_at_peak.size(), 1u);
  EXPECT_EQ(t.live_at_peak[0].bytes, 400 * kMiB);
  ASSERT_EQ(t.live_at_peak[0].frames.size(), 1u);
}

TEST(InspectTest, LegacyHasNoTrace) {
  const DeviceInspect d = InspectFile("legacy_segments.pickle");
  EXPECT_FALSE(d.trace.present);
  EXPECT_EQ(d.trace.peak_reserved_bytes, d.reserved_bytes);
  EXPECT_EQ(d.reserved_bytes, 54 * kMiB);
}

TEST(InspectTest, OptionErrors) {
  InspectOptions zero;
  zero.frames_depth = 0;
  auto report = Inspect(Snapshot{}, zero);
  ASSERT_FALSE(report);
  EXPECT_EQ(report.error().Describe(), "--frames: 0 is out of range; allowed: 1 to 64");
  InspectOptions many;
  many.top_sites = 1001;
  auto top = Inspect(Snapshot{}, many);
  ASSERT_FALSE(top);
  EXPECT_EQ(top.error().Describe(), "--top: 1001 is out of range; allowed: 1 to 1000");
}

TEST(InspectTest, FormatFrameDropsDirectoriesAndControls) {
  EXPECT_EQ(FormatFrame(Frame{"fwd\x1b[31m", "/a/b/model.py", 12}), "model.py:12:fwd?[31m");
}

}  // namespace
}  // namespace memtune::snapshot
