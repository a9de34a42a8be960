// The routing-imbalance model (tensors/moe_load.h, moe_sizes.h): the spread a job gets, the
// rank's load distribution, and the MoE layer's sizes as a function of its expert rows.
#include "tensors/moe_load.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tensors/layer_tensors.h"
#include "tensors/moe_sizes.h"
#include "unit/estimate/test_jobs.h"

namespace memtune::tensors {
namespace {

using estimate::testing::Llama70BJob;
using estimate::testing::MoeLlama70BJob;

TEST(MoeLoadTest, SpreadDefaultsByRouter) {
  EXPECT_EQ(RoutingSpread(Llama70BJob()), 0) << "dense";
  auto job = MoeLlama70BJob();
  EXPECT_EQ(RoutingSpread(job), kDefaultRoutingSpread) << "a learned router";
  job.model.moe_router_force_load_balancing = true;
  EXPECT_EQ(RoutingSpread(job), 0) << "random logits";
  job.memtune.moe_routing_spread = 0.35;
  EXPECT_EQ(RoutingSpread(job), 0.35) << "the job's own value wins";
}

TEST(MoeLoadTest, RankSigmaFollowsTheExpertsItHolds) {
  auto job = MoeLlama70BJob();  // 8 experts over EP 2
  job.memtune.moe_routing_spread = 0.2;
  // var = log(1 + (exp(0.04) - 1) * (2 - 1) / 8) = log(1.0051013...) = 0.0050884...
  EXPECT_NEAR(MakeMoeLoadModel(job).rank_sigma, 0.0713330, 1e-6);
  job.model.expert_model_parallel_size = 8;  // one expert per rank: (8 - 1) / 8
  EXPECT_NEAR(MakeMoeLoadModel(job).rank_sigma, std::sqrt(std::log1p(std::expm1(0.04) * 7.0 / 8.0)),
              1e-12);
  job.model.expert_model_parallel_size = 1;  // every expert local: the load is always 1
  EXPECT_FALSE(MakeMoeLoadModel(job).active());
  job.model.expert_model_parallel_size = 2;
  job.model.recompute_granularity = model::RecomputeGranularity::kFull;
  EXPECT_FALSE(MakeMoeLoadModel(job).active()) << "full recompute is not covered";
}

TEST(MoeLoadTest, RowsAreDeterministicLognormalAndCapped) {
  MoeLoadModel m;
  m.rank_sigma = 0.3;
  const std::int64_t balanced = 100000;
  double sum = 0, sum_log = 0, sum_log2 = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const std::int64_t rows = ExpertRows(m, balanced, i % 50, i / 50);
    EXPECT_EQ(rows, ExpertRows(m, balanced, i % 50, i / 50));
    const double load = static_cast<double>(rows) / balanced;
    sum += load;
    sum_log += std::log(load);
    sum_log2 += std::log(load) * std::log(load);
  }
  const double mean_log = sum_log / n;
  EXPECT_NEAR(sum / n, 1.0, 0.01) << "the balanced rows on average";
  EXPECT_NEAR(mean_log, -0.5 * 0.3 * 0.3, 0.01);
  EXPECT_NEAR(std::sqrt(sum_log2 / n - mean_log * mean_log), 0.3, 0.01);
  EXPECT_NE(ExpertRows(m, balanced, 3, 0), ExpertRows(m, balanced, 3, 1));
  EXPECT_NE(ExpertRows(m, balanced, 3, 0), ExpertRows(m, balanced, 4, 0));
  m.capacity = 1.1;
  for (int i = 0; i < 1000; ++i) EXPECT_LE(ExpertRows(m, balanced, 7, i), 110000);
  EXPECT_EQ(ExpertRows(MoeLoadModel{}, balanced, 3, 0), balanced) << "inactive";
}

// A rank cannot receive more than every token's copies bound for it: with 8 experts, top-2
// and one expert per rank (EP 8) at most 1 copy per token, 8 / 2 = 4x balanced; at the
// largest spread the draws stay below it.
TEST(MoeLoadTest, TheLoadStaysBelowWhatTheGroupCanSend) {
  auto job = MoeLlama70BJob();
  job.model.expert_model_parallel_size = 8;
  job.memtune.moe_routing_spread = 4;
  const MoeLoadModel m = MakeMoeLoadModel(job);
  EXPECT_DOUBLE_EQ(m.max_load, 4.0);
  std::int64_t most = 0;
  for (int i = 0; i < 5000; ++i) most = std::max(most, ExpertRows(m, 1000, i % 61, i / 61));
  EXPECT_EQ(most, 4000);
}

TEST(MoeLoadTest, LayerSizesAreAffineInTheRows) {
  auto job = MoeLlama70BJob();
  job.model.moe_token_dispatcher_type = model::MoeTokenDispatcher::kAlltoall;
  job.model.moe_permute_fusion = true;
  const ActContext ctx = MakeActContext(job);
  const MoeLayerSizes z = MakeMoeLayerSizes(ctx, true);
  // 4096 tokens / SP 4 x top-2 x ETP 4 (the expert TP follows TP).
  EXPECT_EQ(z.balanced_rows, 4096 / 4 * 2 * 4);
  EXPECT_EQ(z.At(z.balanced_rows).kept, z.base.kept);
  ActContext twice = ctx;
  twice.rows_mult = 2;
  const LayerSizes doubled = MakeLayerSizes(twice, true, true);
  const LayerSizes at = z.At(2 * z.balanced_rows);
  EXPECT_EQ(at.kept, doubled.kept);
  EXPECT_EQ(at.fwd, doubled.fwd);
  EXPECT_EQ(at.bwd, doubled.bwd);
  // Row-sized tensors scale, token-sized ones do not; the permutation keeps both kinds.
  EXPECT_EQ(z.per_rows.kept[kMoeDispatch], z.base.kept[kMoeDispatch]);
  EXPECT_EQ(z.per_rows.kept[kLn1Input], 0);
  EXPECT_GT(z.per_rows.kept[kMoePermuteMap], 0);
  EXPECT_LT(z.per_rows.kept[kMoePermuteMap], z.base.kept[kMoePermuteMap]);
  // One row fewer: each row-sized tensor loses exactly its bytes per row.
  const LayerSizes less = z.At(z.balanced_rows - 1);
  EXPECT_EQ(z.base.kept[kMoeDispatch] - less.kept[kMoeDispatch],
            z.base.kept[kMoeDispatch] / z.balanced_rows);
}

// The experts' backward working set is sized by the expert rows, not the sequence: 4096
// tokens / SP 4 x top-2 x ETP 4 = 8192 rows of f_e / ETP = 1024 columns (bf16).
TEST(MoeLoadTest, ExpertBackwardRunsOnTheExpertRows) {
  auto job = MoeLlama70BJob();
  job.model.fp8 = model::Fp8Format::kNone;
  const ActContext ctx = MakeActContext(job);
  const BwdBytes b = LayerBackwardTransients(ctx, true, false);
  const std::int64_t rows = 8192, h = job.model.hidden_size;
  EXPECT_EQ(b[kBwdGradOut], 2 * h / 4 * 4096);
  EXPECT_EQ(b[kBwdGradGather], 2 * h * rows);
  EXPECT_EQ(b[kBwdGradFc2In], 2 * 1024 * rows);
  EXPECT_EQ(b[kBwdGradFc1Out], 2 * 2 * 1024 * rows);  // SwiGLU: two halves
  EXPECT_EQ(b[kBwdFc1InGather], 0);
  EXPECT_EQ(b[kBwdFc1Dgrad], 2 * h * rows);
}

}  // namespace
}  // namespace memtune::tensors
