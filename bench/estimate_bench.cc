// Estimator speed: full per-rank estimates of the Llama3-70B example and a MoE variant of it
// (docs/performance.md).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <iostream>

#include "memtune/estimate/estimate.h"
#include "memtune/model/examples.h"
#include "memtune/model/job_parse.h"

namespace {

// The built-in example the README runs (Llama3-70B FP8-CS SFT, TP4 PP4 VPP5 DP2 on 32 H100),
// through the one job parser, so the benchmark measures exactly what `memtune estimate
// --example llama3-70b-32xh100` estimates.
memtune::model::Job Llama70B() {
  auto text = memtune::model::ExampleJobYaml("llama3-70b-32xh100");
  if (!text) std::abort();
  auto doc = memtune::model::ParseJobText(*text);
  if (!doc) {
    std::cerr << "example job: " << doc.error().Describe() << "\n";
    std::abort();
  }
  return doc->job;
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

// The example made a MoE model (64 experts, top-8, EP 8 over the 32 GPUs' DP x TP ranks),
// balanced (range 0: the closed form) and at the default routing spread (range 1: every
// rank's schedule walked in bytes, rank_walk.h).
void BM_EstimateMoeRouting(benchmark::State& state) {
  auto job = Llama70B();
  auto& m = job.model;
  m.num_moe_experts = 64;
  m.moe_router_topk = 8;
  m.moe_ffn_hidden_size = 3584;
  m.moe_grouped_gemm = true;
  m.moe_token_dispatcher_type = memtune::model::MoeTokenDispatcher::kAlltoall;
  m.moe_permute_fusion = true;
  m.expert_model_parallel_size = 8;
  m.expert_tensor_parallel_size = 1;
  m.cuda_graph_impl = memtune::model::CudaGraphImpl::kNone;  // (MoE layers have no mlp scope)
  m.cuda_graph_scope.clear();
  job.memtune.moe_routing_spread = state.range(0) == 0 ? 0.0 : 0.2;
  memtune::estimate::EstimateOptions options;
  options.with_explanations = false;
  for (auto _ : state) {
    auto estimate = memtune::estimate::EstimateMemory(job, options);
    if (!estimate) state.SkipWithError(estimate.error().Describe().c_str());
    benchmark::DoNotOptimize(estimate);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EstimateMoeRouting)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
