// The Llama3-70B architecture and the seed case's parallel layout, for jobs built in code
// by the unit tests of several subsystems (one definition instead of a copy per fixture).
#pragma once

#include "memtune/model/job.h"

namespace memtune::testing {

// Writes meta-llama/Meta-Llama-3-70B's shape (80 layers, h 8192, f 28672, 64 heads in 8
// query groups of 128, vocab 128256, SwiGLU, RMSNorm, no biases, untied embeddings) and the
// seed case's layout (TP4 PP4 VPP5 with SP, seq 4096, MBS 1, GBS 32, distributed optimizer,
// 32 GPUs) into `job`. Precision, recompute, dropout, position embedding, vocabulary padding
// and the loss are left to the caller.
inline void SetLlama3_70bShape(model::Job& job) {
  model::ModelConfig& m = job.model;
  m.num_layers = 80;
  m.hidden_size = 8192;
  m.ffn_hidden_size = 28672;
  m.num_attention_heads = 64;
  m.num_query_groups = 8;
  m.kv_channels = 128;
  m.vocab_size = 128256;
  m.share_embeddings_and_output_weights = false;
  m.gated_linear_unit = true;
  m.activation_func = "silu";
  m.normalization = model::Normalization::kRMSNorm;
  m.add_bias_linear = false;
  m.tensor_model_parallel_size = 4;
  m.pipeline_model_parallel_size = 4;
  m.virtual_pipeline_model_parallel_size = 5;
  m.sequence_parallel = true;
  m.seq_length = 4096;
  job.train.micro_batch_size = 1;
  job.train.global_batch_size = 32;
  job.optimizer.use_distributed_optimizer = true;
  job.memtune.world_size = 32;
}

}  // namespace memtune::testing
