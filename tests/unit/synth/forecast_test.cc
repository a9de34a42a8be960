// synth::ForecastJob: the replay's statistics per stage and allocator mode.
#include "memtune/synth/forecast.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "memtune/alloc/config.h"
#include "memtune/core/units.h"
#include "unit/estimate/test_jobs.h"
#include "unit/synth/synth_test_util.h"

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

TEST(ForecastTest, PeakActiveOfAMegatronJob) {
  ExpectActiveEqualsAllocated(estimate::testing::TinyJob());
}

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

// The peaks through each iteration, recomputed from the trace itself: PyTorch's allocated
// bytes count blocks (requests rounded up to 512 bytes), and a report after iteration i
// sees every event up to that iteration's optimizer step.
TEST(ForecastTest, PeaksThroughEachIterationFollowTheTrace) {
  const model::Job job = estimate::testing::TinyJob();
  SynthOptions so;
  so.iterations = 3;
  ForecastOptions options;
  options.synth = so;
  auto f = ForecastJob(job, options);
  ASSERT_TRUE(f) << f.error().Describe();
  auto synth = TraceSynthesizer::Create(job, so);
  ASSERT_TRUE(synth);
  for (const auto& st : f->stages) {
    testing::Recorder rec;
    rec.keep_events = true;
    synth->Synthesize(st.pp_rank, rec);
    std::vector<std::int64_t> expected;
    std::unordered_map<alloc::HandleId, std::int64_t> live;
    std::int64_t current = 0;
    for (const SynthEvent& e : rec.events) {
      if (e.op == EventOp::kFree) {
        current -= live[e.handle];
        live.erase(e.handle);
        continue;
      }
      const std::int64_t block = e.bytes < 512 ? 512 : (e.bytes + 511) / 512 * 512;
      live[e.handle] = block;
      current += block;
      while (static_cast<int>(expected.size()) <= e.label.iteration) {
        expected.push_back(expected.empty() ? 0 : expected.back());
      }
      expected[e.label.iteration] = std::max(expected[e.label.iteration], current);
    }
    expected.resize(3);
    EXPECT_EQ(st.own.peak_allocated_through_iteration_bytes, expected) << "stage " << st.pp_rank;
    EXPECT_EQ(st.peak_allocated_through_iteration_bytes, expected) << "stage " << st.pp_rank;
    EXPECT_EQ(st.own.peak_allocated_through_iteration_bytes.back(), st.peak_allocated_bytes);
    EXPECT_EQ(st.own.peak_reserved_through_iteration_bytes.back(), st.own.peak_reserved_bytes);
    EXPECT_EQ(st.own.peak_active_through_iteration_bytes.back(), st.own.peak_active_bytes);
    // Adam's moments appear at the first step: iteration 1's peak is below the steady state's.
    EXPECT_LT(expected[0], expected[1]) << "stage " << st.pp_rank;
    EXPECT_EQ(expected[1], expected[2]) << "stage " << st.pp_rank;
  }
}

TEST(ForecastTest, PeaksThroughIterationsStopAtTheOom) {
  auto f = ForecastJob(estimate::testing::TinyJob(), {});
  ASSERT_TRUE(f);
  ForecastOptions tight;
  tight.capacity_bytes = f->stages.front().own.peak_allocated_through_iteration_bytes.front() / 2;
  auto g = ForecastJob(estimate::testing::TinyJob(), tight);
  ASSERT_TRUE(g);
  const StageForecast& s = g->stages.front();
  ASSERT_TRUE(s.own.oom && s.other.oom);
  EXPECT_EQ(s.own.peak_allocated_through_iteration_bytes.size(), 1u);  // cut in iteration 1
  // Both modes ran out: the stage's allocated peaks come from a replay without a limit.
  EXPECT_EQ(s.peak_allocated_through_iteration_bytes,
            f->stages.front().peak_allocated_through_iteration_bytes);
}

}  // namespace
}  // namespace memtune::synth

namespace memtune::synth {
namespace {

nonpytorch::NonPytorchMemory OnePart(nonpytorch::Moment moment, std::int64_t bytes) {
  return {{{"nccl", "nccl.test", bytes, bytes, bytes, moment, "", true}}};
}

// Memory outside PyTorch takes the device from the moment it appears: NCCL's buffers at the
// first optimizer step cannot use what PyTorch holds in its cache by then, so a part too
// large for what is left fails outside PyTorch; the same part from the start leaves
// PyTorch less room from its first allocation on, and PyTorch's allocator runs out.
TEST(ForecastTest, MemoryOutsidePytorchAppearsAtItsMoment) {
  const model::Job job = estimate::testing::TinyJob();
  auto synth = TraceSynthesizer::Create(job);
  ASSERT_TRUE(synth);
  auto config = alloc::ParseAllocatorConfig("");
  ASSERT_TRUE(config);
  const std::int64_t capacity = std::int64_t{1} << 30;
  const AllocatorRun free_run = SimulateRank(*synth, 0, *config, capacity, {});
  ASSERT_FALSE(free_run.oom);
  const std::int64_t part = capacity - free_run.peak_reserved_bytes + kMiB;

  const AllocatorRun late = SimulateRank(*synth, 0, *config, capacity,
                                         OnePart(nonpytorch::Moment::kFirstOptimizerStep, part));
  ASSERT_TRUE(late.oom);
  EXPECT_EQ(late.oom_outside_part, "nccl.test");
  EXPECT_NE(late.oom_event.find("first optimizer step"), std::string::npos) << late.oom_event;
  EXPECT_NE(late.oom_message.find("NCCL"), std::string::npos);
  EXPECT_GT(late.oom_shortfall_bytes, 0);

  const AllocatorRun early =
      SimulateRank(*synth, 0, *config, capacity, OnePart(nonpytorch::Moment::kStartup, part));
  ASSERT_TRUE(early.oom);
  EXPECT_EQ(early.oom_outside_part, "");
  EXPECT_NE(early.oom_message.find("CUDA out of memory"), std::string::npos);

  // A part that fits leaves the replay as it was, with the device that much smaller.
  const AllocatorRun fits = SimulateRank(*synth, 0, *config, capacity,
                                         OnePart(nonpytorch::Moment::kFirstForward, 64 * kMiB));
  EXPECT_FALSE(fits.oom);
  EXPECT_EQ(fits.peak_reserved_bytes, free_run.peak_reserved_bytes);
}

}  // namespace
}  // namespace memtune::synth
