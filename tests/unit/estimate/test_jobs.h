// Jobs built in code for the estimator tests (no parser involved).
#pragma once

#include <string>
#include <string_view>

#include "memtune/model/job.h"
#include "unit/support/llama3_70b_shape.h"

namespace memtune::estimate::testing {

// A tiny bf16 dense model small enough to check by hand: h=8, 2 heads of 4 (q width 8,
// kv width 8), gated MLP f=16, 2 layers, vocab 32, seq 4, mbs 1, TP=PP=1, no dropout.
inline model::Job TinyJob() {
  model::Job job;
  auto& m = job.model;
  m.num_layers = 2;
  m.hidden_size = 8;
  m.ffn_hidden_size = 16;
  m.num_attention_heads = 2;
  m.num_query_groups = 2;
  m.kv_channels = 4;
  m.vocab_size = 32;
  m.make_vocab_size_divisible_by = 1;
  m.share_embeddings_and_output_weights = false;
  m.gated_linear_unit = true;
  m.activation_func = "silu";
  m.normalization = model::Normalization::kRMSNorm;
  m.add_bias_linear = false;
  m.hidden_dropout = 0;
  m.attention_dropout = 0;
  m.position_embedding_type = model::PositionEmbedding::kRope;
  m.seq_length = 4;
  m.bf16 = true;
  m.params_dtype = model::Dtype::kBf16;
  m.pipeline_dtype = model::Dtype::kBf16;
  m.recompute_modules = {};
  job.train.micro_batch_size = 1;
  job.train.global_batch_size = 1;
  job.optimizer.bf16 = true;
  job.ddp.grad_reduce_in_fp32 = true;
  job.memtune.world_size = 1;
  return job;
}

// A torchtitan FSDP2 job on TinyJob's Llama-style block, scaled so sizes stay whole: two
// blocks, h=64, 4 heads of 16 (q=64), 2 KV groups (kv=32), ffn 128, vocab 256 untied,
// seq 32, micro-batch 1, 2 GPUs, shard degree 2, the given activation checkpointing.
// `activation_checkpoint` is a document spelling ("none", "full", ...).
inline model::Job Fsdp2Job(std::string_view activation_checkpoint = "none") {
  model::Job job = TinyJob();
  auto& m = job.model;
  m.hidden_size = 64;
  m.ffn_hidden_size = 128;
  m.num_attention_heads = 4;
  m.num_query_groups = 2;
  m.kv_channels = 16;
  m.vocab_size = 256;
  m.seq_length = 32;
  job.train.global_batch_size = 2;
  job.memtune.framework = model::Framework::kFsdp2;
  job.memtune.world_size = 2;
  job.memtune.fsdp2.shard_degree = 2;
  for (const auto& entry : model::EnumNames(model::Fsdp2Checkpoint{})) {
    if (activation_checkpoint == entry.name) job.memtune.fsdp2.activation_checkpoint = entry.value;
  }
  return job;
}

// Llama3-70B FP8-CS SFT, TP4 PP4 VPP5 DP2 (megatron.md §3, the Bridge perf recipe).
inline model::Job Llama70BJob() {
  model::Job job;
  memtune::testing::SetLlama3_70bShape(job);
  auto& m = job.model;
  m.should_pad_vocab = true;
  m.hidden_dropout = 0;
  m.attention_dropout = 0;
  m.position_embedding_type = model::PositionEmbedding::kRope;
  m.recompute_granularity = model::RecomputeGranularity::kSelective;
  m.recompute_modules = {"core_attn"};
  m.fp8 = model::Fp8Format::kHybrid;
  m.fp8_recipe = model::Fp8Recipe::kTensorwise;
  m.fp8_param = true;
  m.fp8_param_gather = true;
  m.bf16 = true;
  m.params_dtype = model::Dtype::kBf16;
  m.pipeline_dtype = model::Dtype::kBf16;
  m.cross_entropy_loss_fusion = true;
  job.optimizer.bf16 = true;
  job.ddp.use_distributed_optimizer = true;
  job.ddp.grad_reduce_in_fp32 = false;
  job.memtune.gpu = "h100-sxm-80gb";
  return job;
}

// Llama70BJob made a small MoE: 8 layers on PP 2 (no VPP), 8 experts of 4096 with top-2 on
// grouped GEMMs, EP 2, 16 GPUs.
inline model::Job MoeLlama70BJob() {
  model::Job job = Llama70BJob();
  auto& m = job.model;
  m.num_layers = 8;
  m.pipeline_model_parallel_size = 2;
  m.virtual_pipeline_model_parallel_size = std::nullopt;
  m.num_moe_experts = 8;
  m.moe_router_topk = 2;
  m.moe_ffn_hidden_size = 4096;
  m.moe_grouped_gemm = true;
  m.expert_model_parallel_size = 2;
  job.memtune.world_size = 16;
  return job;
}

}  // namespace memtune::estimate::testing
