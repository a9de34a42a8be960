// The real PyTorch memory snapshots of ../shared/data/real-snapshots/ (outside the
// repository; skipped when absent; ../shared/docs/real-snapshots.md): every device trace
// replays under its own settings with peak and final reserved equal to the recording and
// every recorded event reproduced, and under the recorded configuration as a what-if (no
// address oracle) with the same peak and final reserved.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "memtune/snapshot/replay.h"

namespace memtune::snapshot {
namespace {

namespace fs = std::filesystem;

const char* kDir = MEMTUNE_SOURCE_DIR "/../shared/data/real-snapshots";

std::vector<fs::path> SnapshotFiles() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kDir)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".pickle.gz") || name.ends_with(".pickle")) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::int64_t FinalReserved(const Snapshot& snap, int device) {
  std::int64_t total = 0;
  for (const Segment& seg : snap.segments) total += seg.device == device ? seg.total_size_bytes : 0;
  return total;
}

bool HasTrace(const Snapshot& snap) {
  return std::any_of(snap.device_traces.begin(), snap.device_traces.end(),
                     [](const auto& t) { return !t.empty(); });
}

void CheckFile(const fs::path& path, int& traces) {
  SCOPED_TRACE(path.filename().string());
  auto snap = LoadSnapshotFile(path.string());
  ASSERT_TRUE(snap) << snap.error().Describe();
  if (!HasTrace(*snap)) return;  // state only: replay refuses it (tested with synthetic files)
  auto own = Replay(*snap);
  ASSERT_TRUE(own) << own.error().Describe();
  ReplayOptions same;
  same.alloc_conf = own->devices.front().alloc_conf;
  auto what_if = Replay(*snap, same);
  ASSERT_TRUE(what_if) << what_if.error().Describe();
  ASSERT_EQ(what_if->devices.size(), own->devices.size());
  for (std::size_t i = 0; i < own->devices.size(); ++i) {
    const DeviceReplay& d = own->devices[i];
    SCOPED_TRACE("device " + std::to_string(d.device));
    ++traces;
    EXPECT_FALSE(d.divergence.has_value())
        << d.divergence->event_index << ": " << d.divergence->recorded << " vs "
        << d.divergence->replayed;
    EXPECT_EQ(d.mismatched_events, 0);
    EXPECT_EQ(d.replayed.peak_reserved_bytes, d.recorded.peak_reserved_bytes);
    EXPECT_EQ(d.replayed.final_reserved_bytes, FinalReserved(*snap, d.device));
    const DeviceReplay& w = what_if->devices[i];
    EXPECT_EQ(w.replayed.peak_reserved_bytes, d.recorded.peak_reserved_bytes);
    EXPECT_EQ(w.replayed.final_reserved_bytes, FinalReserved(*snap, d.device));
    EXPECT_EQ(w.replayed.oom, d.recorded.oom);
  }
}

TEST(RealSnapshotsTest, EveryTraceReplaysExactly) {
  if (!fs::exists(kDir)) GTEST_SKIP() << kDir << " not found";
  int traces = 0;
  for (const fs::path& path : SnapshotFiles()) CheckFile(path, traces);
  EXPECT_GT(traces, 0);
  std::cout << traces << " device traces replayed\n";
}

}  // namespace
}  // namespace memtune::snapshot
