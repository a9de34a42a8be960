// The accurate estimate end to end on jobs built in code.
#include <gtest/gtest.h>

#include "memtune/estimate/estimate.h"
#include "unit/estimate/test_jobs.h"

namespace memtune::estimate {
namespace {

using testing::Llama70BJob;
using testing::TinyJob;

TEST(AccurateTest, ModeNamesRoundTrip) {
  EXPECT_STREQ(ModeName(Mode::kBridge), "bridge");
  EXPECT_EQ(*ParseMode("megatron-lm", "--mode"), Mode::kMegatronLm);
  auto bad = ParseMode("exact", "--mode");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().Describe(), "--mode: unknown mode 'exact'; allowed: accurate, megatron-lm, bridge");
}

TEST(AccurateTest, ComponentsSumToAllocated) {
  auto e = EstimateMemory(Llama70BJob());
  ASSERT_TRUE(e) << e.error().Describe();
  for (const auto& r : e->ranks) {
    std::int64_t sum = 0;
    for (const auto& c : r.components) sum += c.bytes;
    EXPECT_EQ(sum, r.allocated_bytes) << "rank " << r.pp_rank;
  }
}

// Each component's kind puts it in one of the rank's totals: a JSON reader summing by kind
// gets the model state, activations and transients the summary prints.
TEST(AccurateTest, ComponentKindsSumToTheirTotals) {
  auto local = Llama70BJob();
  local.model.transformer_impl = "local";  // + MCore local attention's score buffer
  for (const auto& job : {Llama70BJob(), local}) {
    auto e = EstimateMemory(job);
    ASSERT_TRUE(e) << e.error().Describe();
    for (const auto& r : e->ranks) {
      std::int64_t state = 0, activations = 0, transient = 0;
      for (const auto& c : r.components) {
        switch (c.kind) {
          case ComponentKind::kParameters: case ComponentKind::kGradients:
          case ComponentKind::kOptimizer: state += c.bytes; break;
          case ComponentKind::kActivations: case ComponentKind::kLogits: activations += c.bytes; break;
          case ComponentKind::kTransient: transient += c.bytes; break;
        }
      }
      EXPECT_EQ(state, r.model_state_bytes) << job.model.transformer_impl << " rank " << r.pp_rank;
      EXPECT_EQ(activations, r.activation_bytes) << job.model.transformer_impl << " rank " << r.pp_rank;
      EXPECT_EQ(transient, r.transient_bytes) << job.model.transformer_impl << " rank " << r.pp_rank;
    }
  }
}

TEST(AccurateTest, Llama70BScheduleAndPeakRank) {
  auto e = EstimateMemory(Llama70BJob());
  ASSERT_TRUE(e);
  ASSERT_EQ(e->ranks.size(), 4u);
  EXPECT_EQ(e->ranks[0].in_flight_microbatches, 23);
  EXPECT_EQ(e->ranks[3].in_flight_microbatches, 17);
  EXPECT_EQ(e->ranks[0].layers, 20);
  EXPECT_EQ(e->peak_pp_rank, 0);
  EXPECT_EQ(e->peak_allocated_bytes, e->ranks[0].allocated_bytes);
  EXPECT_EQ(e->ranks[0].peak_phase, "backward");
}

TEST(AccurateTest, MoreVirtualStagesLoadTheLastRankMore) {
  auto vpp5 = EstimateMemory(Llama70BJob());
  auto job = Llama70BJob();
  job.model.virtual_pipeline_model_parallel_size = 10;
  auto vpp10 = EstimateMemory(job);
  ASSERT_TRUE(vpp5 && vpp10);
  EXPECT_GT(vpp10->ranks[3].allocated_bytes, vpp5->ranks[3].allocated_bytes);
  EXPECT_LT(vpp10->ranks[0].allocated_bytes, vpp5->ranks[0].allocated_bytes);
}

TEST(AccurateTest, MlpRecomputeLowersActivationsOnly) {
  auto base = EstimateMemory(Llama70BJob());
  auto job = Llama70BJob();
  job.model.recompute_modules = {"mlp"};
  auto mlp = EstimateMemory(job);
  ASSERT_TRUE(base && mlp);
  EXPECT_EQ(mlp->ranks[0].model_state_bytes, base->ranks[0].model_state_bytes);
  EXPECT_LT(mlp->ranks[0].activation_bytes, base->ranks[0].activation_bytes);
}

TEST(AccurateTest, FullRecomputeKeepsCheckpointInputs) {
  auto job = Llama70BJob();
  job.model.recompute_granularity = model::RecomputeGranularity::kFull;
  job.model.recompute_method = model::RecomputeMethod::kUniform;
  job.model.recompute_num_layers = 1;
  job.ddp.grad_reduce_in_fp32 = true;  // no optimizer-step copy: the backward sets the peak
  auto e = EstimateMemory(job);
  ASSERT_TRUE(e);
  std::int64_t checkpoint = 0;
  for (const auto& c : e->ranks[0].components) {
    if (c.name == "act.checkpoint_input") checkpoint = c.bytes;
  }
  // 92 layer-micro-batches, each keeping its bf16 SP-local input (4096/4 tokens x 8192).
  EXPECT_EQ(checkpoint, 92LL * 2 * 8192 * 4096 / 4);
}

TEST(AccurateTest, OptimizerStepCanBeThePeak) {
  auto job = TinyJob();
  job.ddp.grad_reduce_in_fp32 = false;
  auto e = EstimateMemory(job);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->ranks[0].peak_phase, "optimizer step");
  EXPECT_EQ(e->ranks[0].allocated_bytes, e->ranks[0].step_peak_bytes);
}

TEST(AccurateTest, GpuCapacityAndContextComeFromTheCatalog) {
  auto e = EstimateMemory(Llama70BJob());
  ASSERT_TRUE(e);
  EXPECT_EQ(e->gpu_capacity_bytes, 85520809984);
  EXPECT_GT(e->non_pytorch_bytes, 0);
  auto job = Llama70BJob();
  job.memtune.gpu = "no-such-gpu";
  EXPECT_EQ(EstimateMemory(job).error().code, ErrorCode::kNotFound);
}

}  // namespace
}  // namespace memtune::estimate
