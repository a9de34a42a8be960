// Replay on the hand-checked snapshots: the recorded events are reproduced under their own
// settings, the what-if numbers equal the hand-derived ones (allocator.md 4.9, 9).
#include "memtune/snapshot/replay.h"

#include <gtest/gtest.h>

#include "memtune/core/units.h"
#include "snapshot/pickle_test_util.h"

namespace memtune::snapshot {
namespace {

using testing_util::DataPath;

ReplayOptions Conf(const std::string& conf, std::optional<std::int64_t> capacity = std::nullopt) {
  ReplayOptions o;
  o.alloc_conf = conf;
  o.capacity_bytes = capacity;
  return o;
}

DeviceReplay ReplayFile(const std::string& name, ReplayOptions options = {}) {
  auto snap = LoadSnapshotFile(DataPath(name));
  EXPECT_TRUE(snap) << snap.error().Describe();
  if (!snap) return {};
  auto report = Replay(*snap, options);
  EXPECT_TRUE(report) << report.error().Describe();
  if (!report || report->devices.empty()) return {};
  return report->devices[0];
}

class OwnSettingsTest : public testing::TestWithParam<const char*> {};

TEST_P(OwnSettingsTest, ReproducesEveryRecordedEvent) {
  const DeviceReplay d = ReplayFile(GetParam());
  EXPECT_FALSE(d.divergence.has_value())
      << d.divergence->event_index << ": " << d.divergence->recorded << " vs " << d.divergence->replayed;
  EXPECT_EQ(d.mismatched_events, 0);
  EXPECT_GT(d.compared_events, 0);
  EXPECT_EQ(d.replayed.peak_reserved_bytes, d.recorded.peak_reserved_bytes);
}

INSTANTIATE_TEST_SUITE_P(Snapshots, OwnSettingsTest,
                         testing::Values("example1_native.pickle", "example1_expandable.pickle",
                                         "example2_native.pickle", "example2_expandable.pickle",
                                         "midrun_native.pickle", "oom_native.pickle",
                                         "example2_native_protocol2.pickle",
                                         "example1_native.pickle.gz"));

TEST(ReplayTest, Example1ExpandableWins) {
  const DeviceReplay d = ReplayFile("example1_native.pickle", Conf("expandable_segments:True"));
  EXPECT_FALSE(d.own_settings);
  EXPECT_EQ(d.recorded.peak_reserved_bytes, 200 * kMiB);
  EXPECT_EQ(d.replayed.peak_reserved_bytes, 160 * kMiB);
}

TEST(ReplayTest, Example2NativeWins) {
  const DeviceReplay d = ReplayFile("example2_native.pickle", Conf("expandable_segments:True"));
  EXPECT_EQ(d.recorded.peak_reserved_bytes, 54 * kMiB);
  EXPECT_EQ(d.replayed.peak_reserved_bytes, 62 * kMiB);
}

TEST(ReplayTest, RecordedOomAndExpandableFix) {
  const DeviceReplay own = ReplayFile("oom_native.pickle");
  EXPECT_EQ(own.capacity_bytes, 1000 * kMiB);  // device_free 200 MiB + reserved 800 MiB
  EXPECT_TRUE(own.recorded.oom);
  EXPECT_EQ(own.recorded.oom_event_index, 7);
  EXPECT_EQ(own.recorded.oom_reserved_unallocated_bytes, 350 * kMiB);
  EXPECT_TRUE(own.replayed.oom);
  EXPECT_EQ(own.replayed.oom_event_index, 7);
  EXPECT_EQ(own.replayed.oom_message.rfind("CUDA out of memory. Tried to allocate 380.00 MiB.", 0), 0u);

  const DeviceReplay fix = ReplayFile("oom_native.pickle", Conf("expandable_segments:True"));
  EXPECT_FALSE(fix.replayed.oom);
  EXPECT_EQ(fix.replayed.peak_reserved_bytes, 840 * kMiB);
}

TEST(ReplayTest, CapacityGivesAnOomVerdict) {
  const DeviceReplay d = ReplayFile("example2_native.pickle",
                                    Conf("expandable_segments:True", 60 * kMiB));
  EXPECT_TRUE(d.replayed.oom);
  EXPECT_EQ(d.replayed.oom_event_index, 8);
  EXPECT_EQ(d.replayed.oom_request_bytes, 18 * kMiB);
}

TEST(ReplayTest, MidRunIsRebuilt) {
  const DeviceReplay d = ReplayFile("midrun_native.pickle");
  EXPECT_TRUE(d.rebuilt_start);
  EXPECT_FALSE(d.divergence.has_value());
  EXPECT_EQ(d.replayed.final_reserved_bytes, 54 * kMiB);
}

TEST(ReplayTest, DivergenceNamesTheFirstEntry) {
  const DeviceReplay d = ReplayFile("diverges.pickle");
  ASSERT_TRUE(d.divergence.has_value());
  EXPECT_EQ(d.divergence->event_index, 0);
  EXPECT_EQ(d.divergence->recorded, "segment_alloc 0x7f0200000000 100.00 MiB");
  EXPECT_EQ(d.divergence->replayed.rfind("segment_map ", 0), 0u);
}

TEST(ReplayTest, Errors) {
  auto legacy = LoadSnapshotFile(DataPath("legacy_segments.pickle"));
  ASSERT_TRUE(legacy);
  auto none = Replay(*legacy);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().Describe(), "device_traces: the snapshot has no trace to replay");
  auto snap = LoadSnapshotFile(DataPath("oom_native.pickle"));
  ASSERT_TRUE(snap);
  auto bad = Replay(*snap, Conf("expandable_segments:maybe"));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidConfig);
}

}  // namespace
}  // namespace memtune::snapshot
