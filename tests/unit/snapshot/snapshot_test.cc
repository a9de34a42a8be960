// ParseSnapshot / LoadSnapshot: the typed view of the committed test snapshots, the legacy
// layouts, gzip, and the errors for files that are pickles but not snapshots.
#include "memtune/snapshot/snapshot.h"

#include <gtest/gtest.h>

#include "memtune/core/units.h"
#include "snapshot/pickle_test_util.h"

namespace memtune::snapshot {
namespace {

using testing_util::DataPath;
using testing_util::P;
using testing_util::ReadData;

constexpr std::int64_t kSeg1 = 0x7F0200000000;

Snapshot Load(const std::string& name) {
  auto snap = LoadSnapshotFile(DataPath(name));
  EXPECT_TRUE(snap) << snap.error().Describe();
  return snap ? std::move(*snap) : Snapshot{};
}

TEST(SnapshotTest, Example1Native) {
  const Snapshot s = Load("example1_native.pickle");
  EXPECT_EQ(s.format, SnapshotFormat::kCurrent);
  ASSERT_EQ(s.segments.size(), 2u);
  const Segment& seg = s.segments[0];
  EXPECT_EQ(seg.address, kSeg1);
  EXPECT_EQ(seg.total_size_bytes, 100 * kMiB);
  EXPECT_EQ(seg.segment_type, PoolType::kLarge);
  EXPECT_FALSE(seg.is_expandable);
  ASSERT_EQ(seg.blocks.size(), 2u);
  EXPECT_EQ(seg.blocks[0].state, BlockState::kActiveAllocated);
  EXPECT_EQ(seg.blocks[1].address, kSeg1 + 60 * kMiB);
  EXPECT_EQ(seg.blocks[1].requested_bytes, 100 * kMiB);  // stale, as PyTorch writes it
  ASSERT_EQ(s.device_traces.size(), 1u);
  ASSERT_EQ(s.device_traces[0].size(), 7u);
  const TraceEntry& first = s.device_traces[0][0];
  EXPECT_EQ(first.action, TraceAction::kSegmentAlloc);
  EXPECT_EQ(first.addr, kSeg1);
  EXPECT_EQ(first.time_us, 1700000000000000);
  EXPECT_EQ(s.device_traces[0][3].action, TraceAction::kFreeCompleted);
  EXPECT_TRUE(s.settings.present);
  EXPECT_EQ(s.settings.max_split_size_bytes, -1);
  EXPECT_EQ(s.settings.roundup_power2_divisions.size(), 16u);
  EXPECT_EQ(s.settings.roundup_power2_divisions.back().first, 32768);
}

TEST(SnapshotTest, FramesAreInternedAndShared) {
  const Snapshot s = Load("example1_native.pickle");
  // 4 distinct frames; the three stacks are shared by segments, blocks and trace entries.
  EXPECT_EQ(s.frames.size(), 4u);
  EXPECT_EQ(s.stacks.size(), 3u);
  const Block& b = s.segments[0].blocks[0];
  ASSERT_NE(b.stack, kNoStack);
  const auto& stack = s.stacks[static_cast<std::size_t>(b.stack)];
  ASSERT_EQ(stack.size(), 3u);
  EXPECT_EQ(s.frames[static_cast<std::size_t>(stack[0])].name, "attention");
  EXPECT_EQ(s.frames[static_cast<std::size_t>(stack[0])].line, 31);
  EXPECT_EQ(s.device_traces[0][4].stack, b.stack);
}

TEST(SnapshotTest, ExpandableAndSettings) {
  const Snapshot s = Load("example2_expandable.pickle");
  ASSERT_EQ(s.segments.size(), 2u);
  EXPECT_TRUE(s.segments[1].is_expandable);
  EXPECT_EQ(s.segments[0].segment_type, PoolType::kSmall);
  EXPECT_EQ(s.segments[1].total_size_bytes, 60 * kMiB);
  EXPECT_TRUE(s.settings.expandable_segments);
  EXPECT_EQ(s.settings.alloc_conf, "expandable_segments:True");
}

TEST(SnapshotTest, OomEntryUsesDeviceFree) {
  const Snapshot s = Load("oom_native.pickle");
  const TraceEntry& oom = s.device_traces[0].back();
  EXPECT_EQ(oom.action, TraceAction::kOom);
  EXPECT_EQ(oom.addr, 200 * kMiB);
  EXPECT_EQ(oom.size_bytes, 380 * kMiB);
}

TEST(SnapshotTest, LegacySegmentListWithHistory) {
  const Snapshot s = Load("legacy_segments.pickle");
  EXPECT_EQ(s.format, SnapshotFormat::kHistory);
  ASSERT_EQ(s.segments.size(), 3u);
  const Segment& seg = s.segments[2];
  ASSERT_EQ(seg.blocks.size(), 2u);
  EXPECT_EQ(seg.blocks[1].address, seg.address + 30 * kMiB + 512);     // computed
  EXPECT_EQ(seg.blocks[0].requested_bytes, seg.blocks[0].size_bytes);  // no requested_size
  EXPECT_NE(seg.blocks[0].stack, kNoStack);                            // from "history"
  EXPECT_TRUE(s.device_traces.empty());
  EXPECT_FALSE(s.settings.present);
}

TEST(SnapshotTest, Protocol2EqualsProtocol4) {
  const Snapshot a = Load("example2_native.pickle");
  const Snapshot b = Load("example2_native_protocol2.pickle");
  ASSERT_EQ(a.segments.size(), b.segments.size());
  for (std::size_t i = 0; i < a.segments.size(); ++i) {
    EXPECT_EQ(a.segments[i].address, b.segments[i].address);
    EXPECT_EQ(a.segments[i].blocks.size(), b.segments[i].blocks.size());
  }
  EXPECT_EQ(a.device_traces[0].size(), b.device_traces[0].size());
  EXPECT_EQ(a.frames.size(), b.frames.size());
}

TEST(SnapshotTest, GzipIsTransparent) {
  const Snapshot plain = Load("example1_native.pickle");
  const Snapshot gz = Load("example1_native.pickle.gz");
  EXPECT_EQ(gz.segments.size(), plain.segments.size());
  EXPECT_EQ(gz.device_traces[0].size(), plain.device_traces[0].size());
}

TEST(SnapshotTest, GzipErrors) {
  const std::string gz = ReadData("example1_native.pickle.gz");
  ASSERT_TRUE(IsGzip(gz));
  auto cut = LoadSnapshot(gz.substr(0, gz.size() / 2));
  ASSERT_FALSE(cut);
  EXPECT_EQ(cut.error().message, "truncated gzip data");
  std::string corrupt = gz;
  corrupt[12] = static_cast<char>(corrupt[12] ^ 0x55);
  auto bad = LoadSnapshot(corrupt);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message.rfind("corrupt gzip data: ", 0), 0u) << bad.error().message;
  SnapshotLimits small;
  small.max_decompressed_bytes = 100;
  auto bomb = LoadSnapshot(gz, small);
  ASSERT_FALSE(bomb);
  EXPECT_EQ(bomb.error().message, "gzip data expands beyond 100 bytes");
  EXPECT_NE(bomb.error().hint.find("--max-snapshot-size"), std::string::npos);
  for (std::size_t n = 0; n < gz.size(); ++n) {
    ASSERT_FALSE(LoadSnapshot(gz.substr(0, n))) << "gzip prefix of " << n << " bytes accepted";
  }
}

TEST(SnapshotTest, PicklesThatAreNotSnapshots) {
  auto number = LoadSnapshot(P("\x80\x02K\x05."));
  ASSERT_FALSE(number);
  EXPECT_EQ(number.error().message,
            "not a memory snapshot: the pickle holds a int, not a dict with 'segments' or a list "
            "of segments");
  auto dict = LoadSnapshot(P("\x80\x02}."));
  ASSERT_FALSE(dict);
  EXPECT_EQ(dict.error().message,
            "not a memory snapshot: the top-level dict has no 'segments' key");
}

TEST(SnapshotTest, FieldErrorsNameThePath) {
  // {"segments": [{"address": 0, "blocks": [{"size": "x", "state": "inactive"}]}]}
  const std::string p = P("\x80\x02}(X\x08\x00\x00\x00segments](}(X\x07\x00\x00\x00"
                          "address") +
                        P("K\x00X\x06\x00\x00\x00"
                          "blocks](}(X\x04\x00\x00\x00sizeX\x01\x00\x00\x00x") +
                        P("X\x05\x00\x00\x00stateX\x08\x00\x00\x00inactiveueueu.");
  auto snap = LoadSnapshot(p);
  ASSERT_FALSE(snap);
  EXPECT_EQ(snap.error().field, "segments[0].blocks[0].size");
  EXPECT_EQ(snap.error().message, "expected int, got str");
}

TEST(SnapshotTest, FileErrors) {
  auto missing = LoadSnapshotFile("/nonexistent/snap.pickle");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(missing.error().Describe(), "/nonexistent/snap.pickle: cannot open the file");
}

}  // namespace
}  // namespace memtune::snapshot

namespace memtune::snapshot {
namespace {

TEST(SnapshotBudgetTest, MemoSharedTracesAreRefusedBeforeTheyMultiply) {
  auto snap = LoadSnapshot(testing_util::ReadData("shared_trace.pickle"));
  ASSERT_FALSE(snap);
  EXPECT_EQ(snap.error().field.rfind("device_traces[", 0), 0u) << snap.error().field;
  EXPECT_NE(snap.error().message.find("the snapshot converts to more than"), std::string::npos)
      << snap.error().message;
  EXPECT_NE(snap.error().message.find("pickle memo"), std::string::npos);
}

TEST(SnapshotBudgetTest, ASegmentListedTwiceIsRefused) {
  auto snap = LoadSnapshot(testing_util::ReadData("duplicate_segment.pickle"));
  ASSERT_FALSE(snap);
  EXPECT_EQ(snap.error().field, "segments[1]");
  EXPECT_EQ(snap.error().message.rfind("lists the same segment as segments[0]", 0), 0u)
      << snap.error().message;
}

TEST(SnapshotBudgetTest, GzipDefaultLimitIsDocumented) {
  EXPECT_EQ(SnapshotLimits{}.max_decompressed_bytes, 512 * kMiB);
}

}  // namespace
}  // namespace memtune::snapshot
