// Megatron-Core's per-rank pipeline order, checked by hand on small shapes.
#include <gtest/gtest.h>

#include <string>

#include "memtune/estimate/schedule.h"
#include "memtune/synth/schedule_order.h"

namespace memtune::synth {
namespace {

// "F0.1" = forward of micro-batch 0 through chunk 1.
std::string Text(const std::vector<PipelineStep>& steps) {
  std::string s;
  for (const auto& step : steps) {
    if (!s.empty()) s += ' ';
    s += (step.forward ? "F" : "B") + std::to_string(step.microbatch) + "." + std::to_string(step.chunk);
  }
  return s;
}

TEST(ScheduleOrderTest, TableGroupsMicrobatchesPerChunk) {
  EXPECT_EQ(Text(ScheduleTable(3, 2, 2)), "F0.0 F1.0 F0.1 F1.1 F2.0 F2.1");
  EXPECT_EQ(Text(ScheduleTable(4, 2, 4)), "F0.0 F1.0 F2.0 F3.0 F0.1 F1.1 F2.1 F3.1");
  EXPECT_EQ(Text(ScheduleTable(2, 1, 4)), "F0.0 F1.0");
}

TEST(ScheduleOrderTest, NoPipeliningAlternates) {
  EXPECT_EQ(Text(PipelineSchedule(1, 0, 1, 3, 1, false)), "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0");
}

TEST(ScheduleOrderTest, OneFOneBWarmsUpByDistanceToTheLastStage) {
  EXPECT_EQ(Text(PipelineSchedule(2, 0, 1, 3, 2, false)), "F0.0 F1.0 B0.0 F2.0 B1.0 B2.0");
  EXPECT_EQ(Text(PipelineSchedule(2, 1, 1, 3, 2, false)), "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0");
  // Warm-up capped at m: all forwards first.
  EXPECT_EQ(Text(PipelineSchedule(4, 0, 1, 2, 4, false)), "F0.0 F1.0 B0.0 B1.0");
}

TEST(ScheduleOrderTest, InterleavedReversesChunksForBackward) {
  // p=2, v=2, m=2, G=2: rank 1 warm-up = 2·0 + 1·2 = 2.
  EXPECT_EQ(Text(PipelineSchedule(2, 1, 2, 2, 2, false)), "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 B1.0");
  // rank 0 warm-up = 2·1 + 2 = 4 = m·v: everything forward first.
  EXPECT_EQ(Text(PipelineSchedule(2, 0, 2, 2, 2, false)), "F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0");
  // EP overlap adds one warm-up forward.
  EXPECT_EQ(Text(PipelineSchedule(2, 1, 2, 2, 2, true)), "F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0");
}

// The in-flight count the estimator uses is the live maximum of this order.
TEST(ScheduleOrderTest, LiveMaximumMatchesTheEstimatorsInFlightCount) {
  for (int r = 0; r < 4; ++r) {
    const auto steps = PipelineSchedule(4, r, 5, 16, 4, false);
    ASSERT_EQ(steps.size(), 160u);
    int live = 0, peak = 0;
    std::vector<int> per_chunk(5, 0), at_peak(5, 0);
    for (const auto& s : steps) {
      live += s.forward ? 1 : -1;
      per_chunk[s.chunk] += s.forward ? 1 : -1;
      if (live > peak) { peak = live; at_peak = per_chunk; }
    }
    EXPECT_EQ(live, 0);
    EXPECT_EQ(at_peak, estimate::LiveMicrobatchesPerChunk(4, r, 5, 16, 4, false)) << "rank " << r;
  }
}

}  // namespace
}  // namespace memtune::synth
