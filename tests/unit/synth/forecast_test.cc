// synth::ForecastJob: the replay's statistics per stage and allocator mode.
#include <gtest/gtest.h>

#include "memtune/core/units.h"
#include "memtune/synth/forecast.h"
#include "unit/estimate/test_jobs.h"

namespace memtune::synth {
namespace {

// The synthesized traces free every block directly (no record_stream), so no block is ever
// active without being allocated: PyTorch's active_bytes peak equals the allocated peak.
void ExpectActiveEqualsAllocated(const model::Job& job) {
  auto f = ForecastJob(job, {});
  ASSERT_TRUE(f) << f.error().Describe();
  ASSERT_FALSE(f->stages.empty());
  for (const auto& s : f->stages) {
    for (const AllocatorRun* run : {&s.own, &s.other}) {
      EXPECT_GT(run->peak_active_bytes, 0) << "stage " << s.pp_rank << ": " << run->oom_message;
      EXPECT_EQ(run->peak_active_bytes, run->peak_allocated_bytes) << "stage " << s.pp_rank;
      EXPECT_LE(run->peak_active_bytes, run->peak_reserved_bytes) << "stage " << s.pp_rank;
    }
  }
}

TEST(ForecastTest, PeakActiveOfAMegatronJob) { ExpectActiveEqualsAllocated(estimate::testing::TinyJob()); }

TEST(ForecastTest, PeakActiveOfAnFsdp2JobOnThreeStreams) {
  ExpectActiveEqualsAllocated(estimate::testing::Fsdp2Job("selective_op"));
}

TEST(ForecastTest, PeakActiveStopsAtTheOom) {
  auto f = ForecastJob(estimate::testing::TinyJob(), {});
  ASSERT_TRUE(f);
  const std::int64_t peak = f->stages.front().own.peak_allocated_bytes;
  // A GPU too small for the trace's peak: the replay stops at the failed allocation, so
  // the active peak is below the unconstrained one.
  ForecastOptions tight;
  tight.capacity_bytes = peak / 2;
  auto g = ForecastJob(estimate::testing::TinyJob(), tight);
  ASSERT_TRUE(g);
  const AllocatorRun& run = g->stages.front().own;
  ASSERT_TRUE(run.oom);
  EXPECT_LT(run.peak_active_bytes, peak);
  EXPECT_EQ(run.peak_active_bytes, run.peak_allocated_bytes);
}

}  // namespace
}  // namespace memtune::synth
