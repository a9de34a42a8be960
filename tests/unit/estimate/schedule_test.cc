// Pipeline layout and in-flight micro-batch counts (megatron.md §4, MCore schedules.py).
#include "memtune/estimate/schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace memtune::estimate {
namespace {

using ::testing::ElementsAre;

int Total(const std::vector<int>& v) {
  int n = 0;
  for (int x : v) n += x;
  return n;
}

TEST(ScheduleTest, InterleavedInFlightMatchesMegatronExample) {
  // p=4, v=5, m=16, G=p: [23, 21, 19, 17] chunks in flight (megatron.md §4).
  std::vector<int> totals;
  for (int r = 0; r < 4; ++r) totals.push_back(Total(LiveMicrobatchesPerChunk(4, r, 5, 16, 4, false)));
  EXPECT_THAT(totals, ElementsAre(23, 21, 19, 17));
  EXPECT_EQ(WarmupMicrobatches(4, 0, 5, 16, 4, false), 22);
}

TEST(ScheduleTest, InterleavedForwardOrderFillsChunksGroupByGroup) {
  // The first 23 forwards: chunks 0..4 for micro-batches 0-3, then chunk 0 for 4, 5, 6.
  EXPECT_THAT(LiveMicrobatchesPerChunk(4, 0, 5, 16, 4, false), ElementsAre(7, 4, 4, 4, 4));
  // The last rank: 16 warm-up forwards + 1: one micro-batch of the last chunk.
  EXPECT_THAT(LiveMicrobatchesPerChunk(4, 3, 5, 16, 4, false), ElementsAre(4, 4, 4, 4, 1));
}

TEST(ScheduleTest, FewMicrobatchesCapAtAllInWarmup) {
  // m=4: only 20 (chunk, micro-batch) pairs exist; all are in warm-up (80 layers, not 92).
  EXPECT_EQ(WarmupMicrobatches(4, 0, 5, 4, 4, false), 20);
  EXPECT_THAT(LiveMicrobatchesPerChunk(4, 0, 5, 4, 4, false), ElementsAre(4, 4, 4, 4, 4));
}

TEST(ScheduleTest, NonInterleavedHoldsPipelineDepthMinusRank) {
  EXPECT_THAT(LiveMicrobatchesPerChunk(4, 0, 1, 16, 4, false), ElementsAre(4));
  EXPECT_THAT(LiveMicrobatchesPerChunk(4, 3, 1, 16, 4, false), ElementsAre(1));
  EXPECT_THAT(LiveMicrobatchesPerChunk(4, 0, 1, 2, 4, false), ElementsAre(2));
  EXPECT_THAT(LiveMicrobatchesPerChunk(1, 0, 1, 64, 1, false), ElementsAre(1));
}

TEST(ScheduleTest, ExpertOverlapAddsOneWarmupAndGroupSizeMatters) {
  EXPECT_EQ(WarmupMicrobatches(4, 0, 5, 16, 4, true), 23);
  EXPECT_EQ(WarmupMicrobatches(4, 0, 5, 16, 2, false), 6 + 8);
}

model::ModelConfig Model(int layers, int pp, std::optional<int> vpp = std::nullopt) {
  model::ModelConfig m;
  m.num_layers = layers;
  m.pipeline_model_parallel_size = pp;
  m.virtual_pipeline_model_parallel_size = vpp;
  return m;
}

TEST(ScheduleTest, EvenInterleavedLayoutFollowsMcoreOrder) {
  auto stages = BuildPipelineLayout(Model(80, 4, 5));
  ASSERT_TRUE(stages);
  ASSERT_EQ(stages->size(), 4u);
  EXPECT_EQ((*stages)[1].chunks[0].first_layer, 4);
  EXPECT_EQ((*stages)[1].chunks[1].first_layer, 20);
  EXPECT_EQ((*stages)[3].NumLayers(), 20);
  EXPECT_TRUE((*stages)[0].chunks[0].has_embedding);
  EXPECT_TRUE((*stages)[3].chunks[4].has_output);
  EXPECT_FALSE((*stages)[3].chunks[3].has_output);
}

TEST(ScheduleTest, UnevenFirstAndLastStages) {
  auto m = Model(8, 4);
  m.num_layers_in_first_pipeline_stage = 1;
  m.num_layers_in_last_pipeline_stage = 3;
  auto stages = BuildPipelineLayout(m);
  ASSERT_TRUE(stages);
  std::vector<int> layers;
  for (const auto& s : *stages) layers.push_back(s.NumLayers());
  EXPECT_THAT(layers, ElementsAre(1, 2, 2, 3));
}

TEST(ScheduleTest, AccountForEmbeddingAndLoss) {
  auto m = Model(14, 4);
  m.account_for_embedding_in_pipeline_split = true;
  m.account_for_loss_in_pipeline_split = true;
  auto stages = BuildPipelineLayout(m);
  ASSERT_TRUE(stages);
  std::vector<int> layers;
  for (const auto& s : *stages) layers.push_back(s.NumLayers());
  EXPECT_THAT(layers, ElementsAre(3, 4, 4, 3));
}

TEST(ScheduleTest, ExplicitLayoutString) {
  auto m = Model(7, 2);
  m.pipeline_model_parallel_layout = "Et*2|(t*2|)*2,tL";
  auto stages = BuildPipelineLayout(m);
  ASSERT_TRUE(stages);
  ASSERT_EQ((*stages)[0].chunks.size(), 2u);
  EXPECT_EQ((*stages)[0].chunks[0].num_layers, 2);
  EXPECT_EQ((*stages)[1].chunks[0].num_layers, 2);
  EXPECT_EQ((*stages)[0].chunks[1].num_layers, 2);
  EXPECT_EQ((*stages)[1].chunks[1].num_layers, 1);
  EXPECT_EQ((*stages)[1].chunks[1].first_layer, 6);
}

TEST(ScheduleTest, LayersThatDoNotDivideAreAnError) {
  auto stages = BuildPipelineLayout(Model(80, 3));
  ASSERT_FALSE(stages);
  EXPECT_EQ(stages.error().Describe(),
            "model.num_layers: 80 layers (80 with embedding/loss slots) do not divide evenly over 3 "
            "pipeline stages");
  auto vpp = BuildPipelineLayout(Model(80, 4, 3));
  ASSERT_FALSE(vpp);
  EXPECT_EQ(vpp.error().Describe(),
            "model.virtual_pipeline_model_parallel_size: 20 layers of pipeline rank 0 do not divide "
            "over 3 virtual stages");
}

}  // namespace
}  // namespace memtune::estimate
