// Jobs for the check tests: a valid Megatron base job and a valid FSDP2 base job, plus
// lookups over findings.
#pragma once

#include <string>
#include <vector>

#include "memtune/model/checks.h"
#include "memtune/model/job.h"
#include "unit/support/llama3_70b_shape.h"

namespace memtune::model::testing {

// Llama3-70B SFT on 32 x H100: TP4 PP4 VPP5 DP2, SP, MBS 1, GBS 32, seq 4096, bf16 mixed,
// distributed optimizer, no recompute (the playbook's baseline without FP8 / CUDA graphs).
// CheckJob returns no finding for it.
inline Job BaseJob() {
  Job job;
  memtune::testing::SetLlama3_70bShape(job);
  ModelConfig& m = job.model;
  m.hidden_dropout = 0;
  m.attention_dropout = 0;
  m.position_embedding_type = PositionEmbedding::kRope;
  m.bf16 = true;
  m.params_dtype = Dtype::kBf16;
  m.pipeline_dtype = Dtype::kBf16;
  job.optimizer.bf16 = true;
  job.ddp.use_distributed_optimizer = true;
  job.ddp.grad_reduce_in_fp32 = true;
  job.memtune.gpu = "h100-sxm-80gb";
  return job;
}

// Llama3-8B with torchtitan FSDP2 on 8 GPUs (shard 8), local batch 2, seq 8192.
inline Job BaseFsdp2Job() {
  Job job = BaseJob();
  ModelConfig& m = job.model;
  m.num_layers = 32;
  m.hidden_size = 4096;
  m.ffn_hidden_size = 14336;
  m.num_attention_heads = 32;
  m.tensor_model_parallel_size = 1;
  m.pipeline_model_parallel_size = 1;
  m.virtual_pipeline_model_parallel_size.reset();
  m.sequence_parallel = false;
  m.seq_length = 8192;
  job.train.micro_batch_size = 2;
  job.train.global_batch_size = 16;
  job.memtune.framework = Framework::kFsdp2;
  job.memtune.world_size = 8;
  job.memtune.fsdp2.shard_degree = 8;
  return job;
}

// Rule ids of the findings, in order.
inline std::vector<std::string> Ids(const std::vector<Finding>& findings) {
  std::vector<std::string> ids;
  for (const Finding& f : findings) ids.push_back(f.rule_id);
  return ids;
}

// The first finding of a rule, or nullptr.
inline const Finding* FindRule(const std::vector<Finding>& findings, const std::string& id) {
  for (const Finding& f : findings) {
    if (f.rule_id == id) return &f;
  }
  return nullptr;
}

}  // namespace memtune::model::testing
