// The DDP buffers and DP rank 0's optimizer shards, parameter by parameter, checked by hand
// on a one-layer model (sources in tensors/opt_layout.h).
#include "tensors/opt_layout.h"

#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

#include "memtune/estimate/schedule.h"
#include "memtune/model/job_parse.h"
#include "tensors/model_state.h"

namespace memtune::tensors {
namespace {

// One layer of h 64, 4 heads of 16 (MHA), ungated FFN 128, RMSNorm, no biases, vocab 256,
// untied: on one rank, in registration order, the word embedding 16384, linear_proj 4096,
// linear_qkv's norm 64 and weight 12288, linear_fc1's norm 64 and weight 8192, linear_fc2
// 8192, the final norm 64, the output layer 16384 (every size a multiple of 64: no gaps).
model::Job TinyJob(const std::string& extra_ddp, int dp, int layers = 1) {
  const std::string text =
      "model: {num_layers: " + std::to_string(layers) +
      ", hidden_size: 64, ffn_hidden_size: 128, num_attention_heads: 4, "
      "num_query_groups: 4, kv_channels: 16, vocab_size: 256, make_vocab_size_divisible_by: 1, "
      "share_embeddings_and_output_weights: false, gated_linear_unit: false, "
      "activation_func: gelu, add_bias_linear: false, normalization: RMSNorm, seq_length: 256, "
      "position_embedding_type: rope}\n"
      "train: {micro_batch_size: 1, global_batch_size: " +
      std::to_string(dp) +
      "}\n"
      "mixed_precision: bf16_mixed\n"
      "optimizer: {use_distributed_optimizer: true}\n"
      "ddp: {grad_reduce_in_fp32: false" +
      (extra_ddp.empty() ? "" : ", " + extra_ddp) +
      "}\nmemtune: {world_size: " + std::to_string(dp) + ", gpu: h100}\n";
  auto doc = model::ParseJobText(text);
  EXPECT_TRUE(doc.has_value()) << doc.error().Describe();
  return doc ? doc->job : model::Job{};
}

// The chunk of pipeline rank `pp_rank` of a job without VPP whose ranks hold one layer each
// (or all of them with PP 1).
std::vector<estimate::ModelChunk> Chunks(const model::Job& job, int pp_rank) {
  const int pp = job.model.pipeline_model_parallel_size;
  estimate::ModelChunk c;
  c.first_layer = pp == 1 ? 0 : pp_rank;
  c.num_layers = pp == 1 ? static_cast<int>(job.model.num_layers) : 1;
  c.has_embedding = pp_rank == 0;
  c.has_output = pp_rank == pp - 1;
  return {c};
}

OptLayout Layout(const model::Job& job, int pp_rank = 0) {
  const ParamCatalog catalog = MakeParamCatalog(job);
  EXPECT_TRUE(catalog.param_layout);
  return LayoutRank(job, catalog.layout, catalog.moe_pattern, Chunks(job, pp_rank), pp_rank, true);
}

std::vector<std::int64_t> Sizes(const OptLayout& layout) {
  std::vector<std::int64_t> out;
  for (const OptShard& s : layout.shards) out.push_back(s.elements);
  return out;
}

// Reversed: output [0, 16384), final norm .. 16448, fc2 .. 24640, fc1 .. 32832, fc1 norm ..
// 32896, qkv .. 45184, qkv norm .. 45248, proj .. 49344, embedding .. 65728; one bucket
// padded to lcm(2, 128): 65792. DP rank 0 owns [0, 32896): the output layer, fc2, fc1
// (weight-decay group), then the final norm and fc1's norm (no decay).
TEST(OptLayoutTest, OneBucketSplitsBetweenTwoDpRanks) {
  const OptLayout layout = Layout(TinyJob("", 2));
  ASSERT_EQ(layout.chunks.size(), 1u);
  ASSERT_EQ(layout.chunks[0].size(), 1u);
  EXPECT_EQ(layout.chunks[0][0].numel, 65792);
  EXPECT_FALSE(layout.chunks[0][0].expert);
  EXPECT_EQ(Sizes(layout), (std::vector<std::int64_t>{16384, 8192, 8192, 64, 64}));
  EXPECT_EQ(layout.shard_elements[0][0], 32896);
}

// overlap_grad_reduce with bucket_size 20000: a bucket closes at the first parameter that
// reaches it. Output, final norm, fc2: [0, 24640), padded to 24704; fc1, its norm, qkv:
// [24704, 45248), padded to 45312; qkv's norm, proj, embedding: [45312, 65856), padded to
// 65920. DP rank 0 owns the first half of each: 12352 of the output layer; fc1, its norm
// and 2048 of qkv; qkv's norm, proj and 6144 of the embedding.
TEST(OptLayoutTest, BucketsCloseAtBucketSizeAndPadToTheDpLcm) {
  const OptLayout layout = Layout(TinyJob("overlap_grad_reduce: true, bucket_size: 20000", 2));
  ASSERT_EQ(layout.chunks[0].size(), 1u);
  EXPECT_EQ(layout.chunks[0][0].numel, 65920);
  EXPECT_EQ(Sizes(layout), (std::vector<std::int64_t>{12352, 8192, 2048, 4096, 6144, 64, 64}));
  EXPECT_EQ(layout.shard_elements[0][0], 32960);  // half of the 65920, every element a parameter
}

// A pipeline rank > 0 keeps one bucket whatever bucket_size says (distributed_data_parallel.py,
// training.py: bucketing off on pp_rank > 0).
TEST(OptLayoutTest, LaterPipelineRanksUseOneBucket) {
  model::Job job = TinyJob("overlap_grad_reduce: true, bucket_size: 1000", 2, 2);
  job.model.pipeline_model_parallel_size = 2;
  job.memtune.world_size = 4;
  const OptLayout first = Layout(job, 0), last = Layout(job, 1);
  EXPECT_GT(first.shards.size(), last.shards.size());
  // Rank 1: output 16384, final norm 64, fc2 8192, fc1 8192, fc1's norm 64, qkv 12288, its
  // norm 64, proj 4096 = 49344 elements, padded to 49408; DP rank 0 owns 24704: the output
  // layer, fc2 and 64 elements of fc1 (decay), then the final norm.
  EXPECT_EQ(last.chunks[0][0].numel, 49408);
  EXPECT_EQ(Sizes(last), (std::vector<std::int64_t>{16384, 8192, 64, 64}));
}

// Without the distributed optimizer every parameter is a whole shard, nothing is padded, and
// Float16OptimizerWithFloat16Params takes each group's parameters in named_parameters order.
TEST(OptLayoutTest, WithoutTheDistributedOptimizerEveryParameterIsWhole) {
  model::Job job = TinyJob("", 2);
  job.optimizer.use_distributed_optimizer = false;
  const OptLayout layout = Layout(job);
  EXPECT_EQ(layout.chunks[0][0].numel, 65728);
  EXPECT_EQ(Sizes(layout),
            (std::vector<std::int64_t>{16384, 4096, 12288, 8192, 8192, 16384, 64, 64, 64}));
  EXPECT_EQ(layout.shard_elements[0][0], 65728);
}

// The estimator's model state is the layout's: padded buffers, DP rank 0's shards.
TEST(OptLayoutTest, ModelStateTakesTheLayoutsSums) {
  model::Job job = TinyJob("", 2);
  job.ddp.grad_reduce_in_fp32 = false;  // (bf16_mixed turns it on)
  const ParamCatalog catalog = MakeParamCatalog(job);
  const std::vector<estimate::ModelChunk> chunks = Chunks(job, 0);
  const RankParams params = CountRankParams(job, catalog, std::span(chunks), 1);
  const ModelStateRules rules = MakeModelStateRules(job, true);
  const ModelStateBytes s = ComputeModelState(rules, params, Layout(job));
  EXPECT_EQ(s.params_hp, 65792 * 2);    // bf16 param buffer, padded
  EXPECT_EQ(s.main_params, 32896 * 4);  // fp32 main shards
  EXPECT_EQ(s.exp_avg, 32896 * 4);
  EXPECT_EQ(s.step_transient, 32896 * 4);  // bf16 grads: fp32 copies at the step
  EXPECT_EQ(s.grads, 65792 * 2);
}

// Expert parameters live in their own buffer (expert DP) and optimizer, after the dense one.
TEST(OptLayoutTest, ExpertParametersHaveTheirOwnBufferAndComeLast) {
  model::Job job = TinyJob("", 2);
  job.model.num_moe_experts = 4;
  job.model.moe_router_topk = 2;
  job.model.moe_ffn_hidden_size = 128;
  const OptLayout layout = Layout(job);
  ASSERT_EQ(layout.chunks[0].size(), 2u);
  EXPECT_FALSE(layout.chunks[0][0].expert);
  EXPECT_TRUE(layout.chunks[0][1].expert);
  // Four experts of fc1 8192 + fc2 8192 = 65536 elements, divisible: DP rank 0 owns the
  // first half of the reversed buffer, the four experts' fc2 weights (weight0..3 registered
  // after fc1's), four shards of 8192.
  EXPECT_EQ(layout.chunks[0][1].numel, 65536);
  ASSERT_GE(layout.shards.size(), 4u);
  for (std::size_t i = layout.shards.size() - 4; i < layout.shards.size(); ++i) {
    EXPECT_TRUE(layout.shards[i].expert);
    EXPECT_EQ(layout.shards[i].elements, 8192);
  }
  EXPECT_EQ(layout.shard_elements[1][0], 32768);
}

// The estimator's sums-only walk gives the full layout's sums, whatever the buckets.
TEST(OptLayoutTest, TheSumsWalkAgreesWithTheFullLayout) {
  for (const std::string ddp : {"", "overlap_grad_reduce: true, bucket_size: 20000",
                                "overlap_grad_reduce: true, bucket_size: 1000"}) {
    for (bool moe : {false, true}) {
      for (bool dist_opt : {true, false}) {
        model::Job job = TinyJob(ddp, 2, 2);
        job.optimizer.use_distributed_optimizer = dist_opt;
        if (moe) {
          job.model.num_moe_experts = 4;
          job.model.moe_router_topk = 2;
          job.model.moe_ffn_hidden_size = 128;
        }
        const ParamCatalog catalog = MakeParamCatalog(job);
        const auto chunks = Chunks(job, 0);
        const OptLayout full =
            LayoutRank(job, catalog.layout, catalog.moe_pattern, chunks, 0, true);
        const OptLayout sums =
            LayoutRank(job, catalog.layout, catalog.moe_pattern, chunks, 0, false);
        EXPECT_TRUE(sums.shards.empty());
        for (int e = 0; e < 2; ++e) {
          for (int f = 0; f < 2; ++f) {
            EXPECT_EQ(sums.shard_elements[e][f], full.shard_elements[e][f]) << ddp << moe;
            EXPECT_EQ(sums.buffer_elements[e][f], full.buffer_elements[e][f]) << ddp << moe;
          }
        }
        EXPECT_GT(full.shard_elements[0][0], 0);
      }
    }
  }
}

// A model of more than kMaxLayoutTensors tensors (hostile or absurd: 100 layers of 100,000
// experts) keeps the layer-granular model rather than a per-tensor trace of minutes.
TEST(OptLayoutTest, TooManyTensorsKeepTheLayerGranularModel) {
  model::Job job = TinyJob("overlap_grad_reduce: true", 2, 100);
  job.model.num_moe_experts = 100000;
  job.model.moe_router_topk = 2;
  job.model.moe_ffn_hidden_size = 64;
  const ParamCatalog catalog = MakeParamCatalog(job);
  EXPECT_FALSE(catalog.param_layout);
  job.model.num_moe_experts = 256;  // 100 layers x 512 expert tensors: well inside
  EXPECT_TRUE(MakeParamCatalog(job).param_layout);
  EXPECT_LT(LayoutTensorCount(job, MakeParamCatalog(job).layout), kMaxLayoutTensors);
}

// PEFT, Megatron-FSDP, the precision-aware and the CPU-offloaded optimizer keep the
// layer-granular model.
TEST(OptLayoutTest, OnlyMegatronDdpWithGpuOptimizersUsesIt) {
  model::Job job = TinyJob("", 2);
  EXPECT_TRUE(UsesParamLayout(job));
  job.optimizer.use_precision_aware_optimizer = true;
  EXPECT_FALSE(UsesParamLayout(job));
  job = TinyJob("", 2);
  job.optimizer.optimizer_cpu_offload = true;
  EXPECT_FALSE(UsesParamLayout(job));
  job = TinyJob("", 2);
  job.ddp.use_megatron_fsdp = true;
  EXPECT_FALSE(UsesParamLayout(job));
}

}  // namespace
}  // namespace memtune::tensors
