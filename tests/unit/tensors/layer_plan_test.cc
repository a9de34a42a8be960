// The keep policy (tensors/layer_plan.h) the estimator and the trace generator share.
#include "tensors/layer_plan.h"

#include <gtest/gtest.h>

#include <vector>

namespace memtune::tensors {
namespace {

using estimate::ModelChunk;

// A chunk of `n` transformer layers from global layer `first`, with `mtp` MTP layers.
ModelChunk Chunk(int first, int n, int mtp = 0) {
  ModelChunk c;
  c.first_layer = first;
  c.num_layers = n;
  c.num_mtp_layers = mtp;
  return c;
}

model::ModelConfig Model(int num_layers) {
  model::ModelConfig m;
  m.num_layers = num_layers;
  return m;
}

void FullRecompute(model::ModelConfig& m, model::RecomputeMethod method, int per_unit) {
  m.recompute_granularity = model::RecomputeGranularity::kFull;
  m.recompute_method = method;
  m.recompute_num_layers = per_unit;
}

void Offload(model::ModelConfig& m, int layers) {
  m.cpu_offloading = true;
  m.cpu_offloading_activations = true;
  m.cpu_offloading_num_layers = layers;
}

std::vector<LayerKeep> Keeps(const std::vector<LayerPlan>& layers) {
  std::vector<LayerKeep> out;
  for (const LayerPlan& lp : layers) out.push_back(lp.keep);
  return out;
}

std::vector<int> GroupFirsts(const std::vector<LayerPlan>& layers) {
  std::vector<int> out;
  for (const LayerPlan& lp : layers) out.push_back(lp.group_first);
  return out;
}

constexpr LayerKeep kAll = LayerKeep::kAll, kCkpt = LayerKeep::kCheckpointInput,
                    kNone = LayerKeep::kNothing;

TEST(LayerPlanTest, WithoutRecomputeOrOffloadEveryLayerKeepsAll) {
  const model::ModelConfig m = Model(8);
  const auto layers = PlanChunkLayers(m, {}, Chunk(4, 3));
  EXPECT_EQ(Keeps(layers), (std::vector{kAll, kAll, kAll}));
  EXPECT_EQ(GroupFirsts(layers), (std::vector{0, 1, 2}));
  EXPECT_EQ(layers[0].layer, 4);
  EXPECT_EQ(layers[2].layer, 6);
  EXPECT_EQ(ReplayedLayers(MakeKeepRules(m), 3), 0);
}

TEST(LayerPlanTest, MtpLayersFollowTheTransformerLayers) {
  const model::ModelConfig m = Model(8);
  const auto layers = PlanChunkLayers(m, {}, Chunk(6, 2, 1));
  ASSERT_EQ(layers.size(), 3u);
  EXPECT_EQ(layers[1].layer, 7);
  EXPECT_EQ(layers[2].layer, 8);  // num_layers + 0
}

TEST(LayerPlanTest, UniformRecomputeKeepsEachUnitsInput) {
  model::ModelConfig m = Model(5);
  FullRecompute(m, model::RecomputeMethod::kUniform, 2);
  const auto layers = PlanChunkLayers(m, {}, Chunk(0, 5));
  EXPECT_EQ(Keeps(layers), (std::vector{kCkpt, kNone, kCkpt, kNone, kCkpt}));
  EXPECT_EQ(GroupFirsts(layers), (std::vector{0, 0, 2, 2, 4}));
  EXPECT_EQ(ReplayedLayers(MakeKeepRules(m), 5), 2);
  EXPECT_EQ(ReplayedLayers(MakeKeepRules(m), 1), 1);  // a unit is at most the chunk
}

TEST(LayerPlanTest, BlockRecomputeCheckpointsTheFirstLayersOneByOne) {
  model::ModelConfig m = Model(4);
  FullRecompute(m, model::RecomputeMethod::kBlock, 2);
  const auto layers = PlanChunkLayers(m, {}, Chunk(0, 4));
  EXPECT_EQ(Keeps(layers), (std::vector{kCkpt, kCkpt, kAll, kAll}));
  EXPECT_EQ(GroupFirsts(layers), (std::vector{0, 1, 2, 3}));
  EXPECT_EQ(ReplayedLayers(MakeKeepRules(m), 4), 1);
}

TEST(LayerPlanTest, OffloadedLayersKeepNothingOnTheDevice) {
  model::ModelConfig m = Model(4);
  Offload(m, 2);
  const auto layers = PlanChunkLayers(m, {}, Chunk(0, 4));
  EXPECT_EQ(Keeps(layers), (std::vector{kNone, kNone, kAll, kAll}));
  EXPECT_EQ(GroupFirsts(layers), (std::vector{0, 1, 2, 3}));
  EXPECT_EQ(ReplayedLayers(MakeKeepRules(m), 4), 1);
  m.cpu_offloading_activations = false;  // weights only: activations stay
  EXPECT_EQ(Keeps(PlanChunkLayers(m, {}, Chunk(0, 4))), (std::vector{kAll, kAll, kAll, kAll}));
  EXPECT_EQ(ReplayedLayers(MakeKeepRules(m), 4), 0);
}

TEST(LayerPlanTest, BlockRecomputeComesBeforeOffloading) {
  model::ModelConfig m = Model(4);
  FullRecompute(m, model::RecomputeMethod::kBlock, 1);
  Offload(m, 2);
  EXPECT_EQ(Keeps(PlanChunkLayers(m, {}, Chunk(0, 4))), (std::vector{kCkpt, kNone, kAll, kAll}));
}

TEST(LayerPlanTest, KindsFollowTheMoePatternAndTheBf16Layers) {
  model::ModelConfig m = Model(4);
  m.first_last_layers_bf16 = true;
  m.num_layers_at_start_in_bf16 = 1;
  m.num_layers_at_end_in_bf16 = 1;
  const std::vector<bool> pattern = {false, true, false};  // layer 3: past the end, dense
  const auto layers = PlanChunkLayers(m, pattern, Chunk(0, 4));
  std::vector<int> moe, fp8;
  for (const LayerPlan& lp : layers) {
    moe.push_back(lp.kind_moe);
    fp8.push_back(lp.kind_fp8);
  }
  EXPECT_EQ(moe, (std::vector{0, 1, 0, 0}));
  EXPECT_EQ(fp8, (std::vector{0, 1, 1, 0}));
}

TEST(LayerPlanTest, PlanChunkLayersIsPlanLayerForEachLayer) {
  model::ModelConfig m = Model(6);
  FullRecompute(m, model::RecomputeMethod::kUniform, 4);
  const ModelChunk chunk = Chunk(0, 6);
  const auto layers = PlanChunkLayers(m, {}, chunk);
  const KeepRules rules = MakeKeepRules(m);
  for (int i = 0; i < 6; ++i) {
    const LayerPlan lp = PlanLayer(m, rules, {}, chunk, i);
    EXPECT_EQ(lp.keep, layers[i].keep) << i;
    EXPECT_EQ(lp.group_first, layers[i].group_first) << i;
  }
}

}  // namespace
}  // namespace memtune::tensors
