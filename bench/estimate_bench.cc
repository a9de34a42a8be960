// Estimator speed: full per-rank estimates of the Llama3-70B example (docs/performance.md).
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

}  // namespace
