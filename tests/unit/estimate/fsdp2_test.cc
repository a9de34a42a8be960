// The FSDP2 (torchtitan) estimator: parameter shards, activations per AC mode, the loss,
// and what it refuses. Expectations are derived by hand in the comments.
#include <gtest/gtest.h>

#include <string>

#include "memtune/estimate/estimate.h"
#include "tensors/fsdp2_backward.h"
#include "tensors/fsdp2_tensors.h"
#include "unit/estimate/test_jobs.h"

namespace memtune::estimate {
namespace {

using tensors::Fsdp2Ac;
using tensors::MakeFsdp2Facts;
using testing::Fsdp2Job;

std::int64_t Component(const Estimate& e, const std::string& name) {
  for (const auto& c : e.ranks.front().components) {
    if (c.name == name) return c.bytes;
  }
  return -1;
}

TEST(Fsdp2Test, ParametersArePaddedFp32ShardsPerTensor) {
  // Per block, rows/2 * cols: norm 32, wq 32*64, wk 16*64, wv 16*64, wo 32*64, norm 32,
  // w1 64*64, w2 32*128, w3 64*64 = 18,496. Root: embedding 128*64 + norm 32 + output
  // 128*64 = 16,416. Total 2 * 18,496 + 16,416 = 53,408 elements, 4 bytes each.
  auto e = EstimateMemory(Fsdp2Job());
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(Component(*e, "params"), 4 * 53408);
  EXPECT_EQ(Component(*e, "opt.exp_avg"), 4 * 53408);
  EXPECT_EQ(Component(*e, "opt.exp_avg_sq"), 4 * 53408);
  // Shard degree 3 (world 3): every dim 0 is padded to ceil(rows / 3) rows.
  auto job = Fsdp2Job();
  job.memtune.world_size = 3;
  job.memtune.fsdp2.shard_degree = 3;
  auto facts = MakeFsdp2Facts(job);
  ASSERT_TRUE(facts);
  // 22 + 22*64 + 11*64 + 11*64 + 22*64 + 22 + 43*64 + 22*128 + 43*64
  EXPECT_EQ(facts->BlockShardElements(),
            22 + 22 * 64 + 11 * 64 + 11 * 64 + 22 * 64 + 22 + 43 * 64 + 22 * 128 + 43 * 64);
}

TEST(Fsdp2Test, SavedActivationsFollowTheCheckpointMode) {
  // No AC, N = 32 tokens: norms 2*(4+2+2)*N*h = 32,768; RoPE fp32 4*N*(64+32) = 12,288;
  // SDPA q,k,v,out (k/v repeated to 64) 4*2*N*64 = 16,384 + lse 4*N*4 = 512;
  // SwiGLU 4*2*N*128 = 32,768. Total 94,720 bytes per block.
  auto none = MakeFsdp2Facts(Fsdp2Job("none"));
  ASSERT_TRUE(none);
  EXPECT_EQ(none->BlockEagerBytes(), 94720);
  EXPECT_EQ(none->BlockKeptBytes(0), 94720);
  // selective_op: the block input 2*N*h = 4,096 + wq 4,096 + wv 2,048 + w1 8,192 + w2 4,096
  // (torchtitan saves mm #1, #3, #5, #7) + SDPA out 4,096 + lse 512.
  auto op = MakeFsdp2Facts(Fsdp2Job("selective_op"));
  ASSERT_TRUE(op);
  EXPECT_EQ(op->BlockKeptBytes(0), 27136);
  // full: the block input only; selective_layer (every 2nd block): block 1 checkpointed.
  auto full = MakeFsdp2Facts(Fsdp2Job("full"));
  ASSERT_TRUE(full);
  EXPECT_EQ(full->BlockKeptBytes(1), 4096);
  auto layer = MakeFsdp2Facts(Fsdp2Job("selective_layer"));
  ASSERT_TRUE(layer);
  EXPECT_EQ(layer->BlockKeptBytes(0), 94720);
  EXPECT_EQ(layer->BlockKeptBytes(1), 4096);
}

TEST(Fsdp2Test, QkLayernormAddsQwen3NormWeightsAndSavedTensors) {
  // Qwen3 block: q_norm and k_norm weights (head_dim 16 each, 8 rows per shard of 2) join
  // the block: 18,496 + 16 shard elements.
  auto job = Fsdp2Job("none");
  job.model.qk_layernorm = true;
  auto qwen = MakeFsdp2Facts(job);
  ASSERT_TRUE(qwen) << qwen.error().message;
  EXPECT_EQ(qwen->BlockShardElements(), 18496 + 16);
  EXPECT_EQ(std::string(qwen->block_params[tensors::kQNorm].name), "attention.q_norm.weight");
  EXPECT_EQ(std::string(qwen->block_params[tensors::kKNorm].name), "attention.k_norm.weight");
  // N = 32 tokens, q = 64 (4 heads), kv = 32 (2 heads), head_dim 16. Llama's RoPE fp32
  // copies (4 * N * (64 + 32) = 12,288) are gone; the norms save x.float() (4*N*64 = 8,192;
  // 4*N*32 = 4,096), rstd per (token, head) (4*N*4 = 512; 4*N*2 = 256) and the bf16 output
  // (2*N*64 = 4,096; 2*N*32 = 2,048); RoPE saves bf16 cos and sin (2 * 32 * 16 = 1,024
  // each): 21,248. 94,720 - 12,288 + 21,248 = 103,680.
  EXPECT_EQ(qwen->BlockEagerBytes(), 103680);
  std::int64_t rstd = 0;
  for (const auto& t : qwen->block_eager) {
    const std::string name = t.name;
    if (name == "qnorm.rstd" || name == "knorm.rstd") rstd += t.bytes;
    EXPECT_NE(name, "rope.q_fp32");
  }
  EXPECT_EQ(rstd, 512 + 256);
  // rope_cache: fp32 (seq 32, 2 * head_dim 16) = 4,096 bytes against freqs_cis' 2,048.
  auto e = EstimateMemory(job);
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(Component(*e, "buffers"), 4096);
  EXPECT_EQ(Component(*EstimateMemory(Fsdp2Job("none")), "buffers"), 2048);
  // Checkpointed blocks keep the same input; selective_op the same policy outputs.
  job.memtune.fsdp2.activation_checkpoint = Fsdp2Ac::kSelectiveOp;
  EXPECT_EQ(MakeFsdp2Facts(job)->BlockKeptBytes(0), 27136);
}

TEST(Fsdp2Test, QkLayernormRefusesCompileAndContextParallelism) {
  auto job = Fsdp2Job("full");
  job.model.qk_layernorm = true;
  job.memtune.fsdp2.compile = true;
  auto compiled = EstimateMemory(job);
  ASSERT_FALSE(compiled);
  EXPECT_EQ(compiled.error().code, ErrorCode::kUnsupported);
  EXPECT_EQ(compiled.error().field, "model.qk_layernorm");
  EXPECT_NE(compiled.error().message.find("torch.compile"), std::string::npos);
  job.memtune.fsdp2.compile = false;
  job.model.context_parallel_size = 2;
  job.memtune.world_size = 4;
  auto cp = EstimateMemory(job);
  ASSERT_FALSE(cp);
  EXPECT_EQ(cp.error().field, "model.qk_layernorm");
  EXPECT_NE(cp.error().message.find("rope_cache"), std::string::npos);
}

// A long sequence and a large vocabulary make the loss the peak: N = 4096, V = 32768.
model::Job LossBoundJob() {
  auto job = Fsdp2Job("full");
  job.model.seq_length = 4096;
  job.model.vocab_size = 32768;
  return job;
}

TEST(Fsdp2Test, LossBackwardHoldsThreeFp32LogitsOrFourWithLossParallel) {
  auto job = LossBoundJob();
  auto e = EstimateMemory(job);
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->ranks.front().peak_phase, "loss backward");
  EXPECT_EQ(Component(*e, "act.logits"), 3 * 4 * std::int64_t{4096} * 32768);
  job.model.tensor_model_parallel_size = 2;
  job.model.sequence_parallel = true;
  job.memtune.world_size = 4;
  e = EstimateMemory(job);
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(Component(*e, "act.logits"), 4 * 4 * std::int64_t{4096} * 32768 / 2);
}

TEST(Fsdp2Test, CompiledLossKeepsBf16LogitsAndRowStatistics) {
  // Same long sequence, loss compiled: the bf16 logits (2 B) and two fp32 statistics per
  // row are saved, the fused backward writes the bf16 gradient (2 B): 4 B per logit plus
  // 8 B per row, against 12 B per logit eagerly.
  auto job = LossBoundJob();
  job.memtune.fsdp2.compile = true;
  job.memtune.fsdp2.compile_loss = true;
  auto e = EstimateMemory(job);
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->ranks.front().peak_phase, "loss backward");
  EXPECT_EQ(Component(*e, "act.logits"), 2 * 2 * std::int64_t{4096} * 32768 + 8 * 4096);
  // Without compile, compile_loss is refused by the checks (torchtitan compiles the loss
  // only together with the model).
  job.memtune.fsdp2.compile = false;
  auto refused = EstimateMemory(job);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().field, "memtune.fsdp2.compile_loss");
}

TEST(Fsdp2Test, ContextParallelSplitsTokensAndShardsOverDpShardTimesCp) {
  // 4 GPUs: dp_shard 2 x cp 2. FSDP's mesh is dp_shard_cp (4 ranks); a rank holds seq / 2.
  auto job = Fsdp2Job("full");
  job.model.context_parallel_size = 2;
  job.memtune.world_size = 4;
  auto facts = MakeFsdp2Facts(job);
  ASSERT_TRUE(facts) << facts.error().message;
  EXPECT_EQ(facts->shard, 4);
  EXPECT_EQ(facts->tokens, 16);
  EXPECT_EQ(facts->microbatches, 1);  // global batch 2 = micro-batch 1 x dp_shard 2
  // 64 rows / 4 = 16 rows of wq.
  EXPECT_EQ(facts->block_params[1].ShardElements(facts->shard), 16 * 64);
  job.model.seq_length = 30;  // not divisible by 2 * cp = 4 (load-balanced chunks)
  auto bad = MakeFsdp2Facts(job);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().field, "model.seq_length");
}

TEST(Fsdp2Test, FactsRefuseAShardDegreeOrModeTheChecksWouldCatch) {
  // The synthesizer sizes jobs without EstimateMemory's structural checks: the facts must
  // refuse a non-dividing shard degree and an unknown AC mode on their own.
  auto job = Fsdp2Job("full");
  job.memtune.fsdp2.shard_degree = 3;  // 2 GPUs
  auto facts = MakeFsdp2Facts(job);
  ASSERT_FALSE(facts);
  EXPECT_EQ(facts.error().code, ErrorCode::kInvalidConfig);
  EXPECT_EQ(facts.error().field, "memtune.fsdp2.shard_degree");
}

TEST(Fsdp2Test, CompatibilityModesRefuseFsdp2Jobs) {
  for (Mode mode : {Mode::kMegatronLm, Mode::kBridge}) {
    EstimateOptions options;
    options.mode = mode;
    auto e = EstimateMemory(Fsdp2Job("full"), options);
    ASSERT_FALSE(e) << ModeName(mode);
    EXPECT_EQ(e.error().code, ErrorCode::kUnsupported);
    EXPECT_EQ(e.error().field, "memtune.framework");
  }
}

TEST(Fsdp2Test, RefusesWhatItDoesNotModel) {
  struct Case {
    const char* field;
    ErrorCode code;
    void (*edit)(model::Job&);
  };
  const Case cases[] = {
      {"memtune.fsdp2.compile", ErrorCode::kUnsupported,
       [](model::Job& j) {
         j.memtune.fsdp2.activation_checkpoint = model::Fsdp2Checkpoint::kNone;
         j.memtune.fsdp2.compile = true;
       }},
      {"model.num_moe_experts", ErrorCode::kUnsupported,
       [](model::Job& j) { j.model.num_moe_experts = 8; }},
      {"model.num_query_groups",
       ErrorCode::kInvalidConfig,  // 2 KV heads cannot split over 4 TP ranks
       [](model::Job& j) {
         j.model.tensor_model_parallel_size = 4;
         j.memtune.world_size = 8;
       }},
      {"model.add_bias_linear", ErrorCode::kUnsupported,
       [](model::Job& j) { j.model.add_bias_linear = true; }},
      {"memtune.fsdp2.param_dtype", ErrorCode::kUnsupported,
       [](model::Job& j) { j.memtune.fsdp2.param_dtype = model::Dtype::kFp32; }},
      {"memtune.fsdp2.reshard_after_forward", ErrorCode::kUnsupported,
       [](model::Job& j) {  // torchtitan's "always" policy under PP
         j.model.pipeline_model_parallel_size = 2;
         j.memtune.world_size = 4;
         j.memtune.fsdp2.reshard_after_forward = true;
       }},
      {"model.virtual_pipeline_model_parallel_size", ErrorCode::kInvalidConfig,
       [](model::Job& j) {  // stages per rank without the interleaved schedule
         j.model.pipeline_model_parallel_size = 2;
         j.model.virtual_pipeline_model_parallel_size = 2;
         j.memtune.world_size = 4;
         j.memtune.fsdp2.reshard_after_forward = false;
       }},
      {"model.virtual_pipeline_model_parallel_size", ErrorCode::kUnsupported,
       [](model::Job& j) {  // FSDP reshards stages mid-step beyond 3 per rank
         j.model.num_layers = 16;
         j.model.pipeline_model_parallel_size = 2;
         j.model.virtual_pipeline_model_parallel_size = 4;
         j.memtune.world_size = 4;
         j.memtune.fsdp2.reshard_after_forward = false;
         j.memtune.fsdp2.pipeline_schedule = model::Fsdp2PipelineSchedule::kInterleaved1F1B;
       }},
      {"model.multi_latent_attention", ErrorCode::kUnsupported,
       [](model::Job& j) { j.model.multi_latent_attention = true; }},
  };
  for (const Case& c : cases) {
    model::Job job = Fsdp2Job("full");
    c.edit(job);
    auto e = EstimateMemory(job);
    ASSERT_FALSE(e) << c.field;
    EXPECT_EQ(e.error().code, c.code) << c.field;
    EXPECT_EQ(e.error().field, c.field);
  }
  model::Job job = Fsdp2Job("full");
  job.model.add_bias_linear = true;
  EXPECT_NE(EstimateMemory(job).error().message.find("torchtitan's Llama"), std::string::npos);
}

}  // namespace
}  // namespace memtune::estimate
