// Estimator speed: full per-rank estimates of the Llama3-70B example (docs/performance.md).
#include <benchmark/benchmark.h>

#include "memtune/estimate/estimate.h"
#include "memtune/model/job.h"

namespace {

// Llama3-70B FP8-CS SFT, TP4 PP4 VPP5 DP2 on 32 H100 (the Bridge perf recipe).
memtune::model::Job Llama70B() {
  memtune::model::Job job;
  auto& m = job.model;
  m.num_layers = 80;
  m.hidden_size = 8192;
  m.ffn_hidden_size = 28672;
  m.num_attention_heads = 64;
  m.num_query_groups = 8;
  m.kv_channels = 128;
  m.vocab_size = 128256;
  m.should_pad_vocab = true;
  m.share_embeddings_and_output_weights = false;
  m.gated_linear_unit = true;
  m.activation_func = "silu";
  m.normalization = memtune::model::Normalization::kRMSNorm;
  m.add_bias_linear = false;
  m.hidden_dropout = 0;
  m.position_embedding_type = "rope";
  m.tensor_model_parallel_size = 4;
  m.pipeline_model_parallel_size = 4;
  m.virtual_pipeline_model_parallel_size = 5;
  m.sequence_parallel = true;
  m.seq_length = 4096;
  m.recompute_granularity = memtune::model::RecomputeGranularity::kSelective;
  m.recompute_modules = {"core_attn"};
  m.fp8 = "hybrid";
  m.fp8_recipe = "tensorwise";
  m.fp8_param = m.fp8_param_gather = true;
  m.bf16 = true;
  m.params_dtype = memtune::model::Dtype::kBf16;
  job.train.micro_batch_size = 1;
  job.train.global_batch_size = 32;
  job.optimizer.use_distributed_optimizer = true;
  job.ddp.use_distributed_optimizer = true;
  job.memtune.world_size = 32;
  job.memtune.gpu = "h100-sxm-80gb";
  return job;
}

// Numbers and named components of every rank (what a planner sweeping layouts needs).
void BM_EstimateLlama70B(benchmark::State& state) {
  const auto job = Llama70B();
  memtune::estimate::EstimateOptions options;
  options.with_explanations = false;
  for (auto _ : state) {
    auto estimate = memtune::estimate::EstimateMemory(job, options);
    benchmark::DoNotOptimize(estimate);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EstimateLlama70B);

// The same with every component's explanation string (what `memtune estimate` prints).
void BM_EstimateLlama70BExplained(benchmark::State& state) {
  const auto job = Llama70B();
  for (auto _ : state) {
    auto estimate = memtune::estimate::EstimateMemory(job);
    benchmark::DoNotOptimize(estimate);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EstimateLlama70BExplained);

}  // namespace
