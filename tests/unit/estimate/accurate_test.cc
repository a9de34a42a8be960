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
  EXPECT_EQ(bad.error().Describe(),
            "--mode: unknown mode 'exact'; allowed: accurate, megatron-lm, bridge");
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
  local.model.transformer_impl =
      model::TransformerImpl::kLocal;  // + MCore local attention's score buffer
  for (const auto& job : {Llama70BJob(), local}) {
    auto e = EstimateMemory(job);
    ASSERT_TRUE(e) << e.error().Describe();
    for (const auto& r : e->ranks) {
      std::int64_t state = 0, activations = 0, transient = 0;
      for (const auto& c : r.components) {
        switch (c.kind) {
          case ComponentKind::kParameters:
          case ComponentKind::kGradients:
          case ComponentKind::kOptimizer:
            state += c.bytes;
            break;
          case ComponentKind::kActivations:
          case ComponentKind::kLogits:
            activations += c.bytes;
            break;
          case ComponentKind::kTransient:
            transient += c.bytes;
            break;
        }
      }
      EXPECT_EQ(state, r.model_state_bytes)
          << model::NameOf(job.model.transformer_impl) << " rank " << r.pp_rank;
      EXPECT_EQ(activations, r.activation_bytes)
          << model::NameOf(job.model.transformer_impl) << " rank " << r.pp_rank;
      EXPECT_EQ(transient, r.transient_bytes)
          << model::NameOf(job.model.transformer_impl) << " rank " << r.pp_rank;
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
  job.ddp.grad_reduce_in_fp32 = true;  // no optimizer-step copies: the backward sets the peak
  job.model.fp8_param_gather = false;
  auto e = EstimateMemory(job);
  ASSERT_TRUE(e);
  std::int64_t checkpoint = 0;
  for (const auto& c : e->ranks[0].components) {
    if (c.name == "act.checkpoint_input") checkpoint = c.bytes;
  }
  // 92 layer-micro-batches, each keeping its bf16 SP-local input (4096/4 tokens x 8192).
  EXPECT_EQ(checkpoint, 92LL * 2 * 8192 * 4096 / 4);
}

// TE quantize_master_weights re-quantizes every fp8 parameter from a bf16 copy of its fp32
// main shard, all copies alive at once, on top of the fp32 gradient copies and Adam's state.
TEST(AccurateTest, Fp8ParamGatherStepHoldsBf16CopiesOfTheMainShards) {
  auto job = Llama70BJob();
  job.model.recompute_modules = {"mlp"};  // small activations: the step is the peak
  auto e = EstimateMemory(job);
  ASSERT_TRUE(e);
  const RankEstimate& r = e->ranks[1];  // a middle stage: only transformer layers
  ASSERT_EQ(r.peak_phase, "optimizer step");
  std::int64_t cast = 0, fp8 = 0, step = 0;
  for (const auto& c : r.components) {
    if (c.name == "tmp.fp8_cast") cast = c.bytes;
    if (c.name == "params.fp8") fp8 = c.bytes;
    if (c.name == "tmp.step") step = c.bytes;
  }
  const int dp = 2;               // 32 GPUs / (TP4 x PP4)
  EXPECT_EQ(cast, fp8 / dp * 2);  // 1-byte fp8 elements, sharded over DP, copied as bf16
  EXPECT_EQ(r.step_peak_bytes, r.model_state_bytes + r.carried_bytes + step + cast);
  EXPECT_EQ(r.allocated_bytes, r.step_peak_bytes);
  // The stage's 5 chunks each keep their last received input and its gradient, bf16
  // [4096 / TP4 tokens, 8192] (sequence parallel), through the step.
  EXPECT_EQ(r.carried_bytes, 5 * 2 * (2LL * 1024 * 8192));
  std::int64_t carry = 0;
  for (const auto& c : r.components) {
    if (c.name == "act.pipeline_carry") carry = c.bytes;
  }
  EXPECT_EQ(carry, r.carried_bytes);
  // The first stage's chunk 0 starts from the embedding: 4 fed chunks.
  EXPECT_EQ(e->ranks[0].carried_bytes, 4 * 2 * (2LL * 1024 * 8192));

  // Without the distributed optimizer's fp8 param gather the step casts nothing.
  job.model.fp8_param_gather = false;
  auto off = EstimateMemory(job);
  ASSERT_TRUE(off);
  EXPECT_EQ(off->ranks[1].step_peak_bytes, r.step_peak_bytes - cast);
  // Nor when a precision-aware optimizer re-quantizes (delayed scaling: MCore's
  // use_precision_aware_optimizer_no_fp8_or_ds_fp8).
  job.model.fp8_param_gather = true;
  job.model.fp8_recipe = model::Fp8Recipe::kDelayed;
  job.optimizer.use_precision_aware_optimizer = true;
  auto aware = EstimateMemory(job);
  ASSERT_TRUE(aware);
  for (const auto& c : aware->ranks[1].components) EXPECT_NE(c.name, "tmp.fp8_cast");
}

TEST(AccurateTest, OptimizerStepCanBeThePeak) {
  auto job = TinyJob();
  job.ddp.grad_reduce_in_fp32 = false;
  auto e = EstimateMemory(job);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->ranks[0].peak_phase, "optimizer step");
  EXPECT_EQ(e->ranks[0].allocated_bytes, e->ranks[0].step_peak_bytes);
}

TEST(AccurateTest, GpuCapacityComesFromTheCatalog) {
  auto e = EstimateMemory(Llama70BJob());
  ASSERT_TRUE(e);
  EXPECT_EQ(e->gpu_capacity_bytes, 85520809984);
  auto job = Llama70BJob();
  job.memtune.gpu = "no-such-gpu";
  EXPECT_EQ(EstimateMemory(job).error().code, ErrorCode::kNotFound);
}

}  // namespace
}  // namespace memtune::estimate
