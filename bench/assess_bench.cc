// AssessJob speed (docs/performance.md, "Assessment"): the whole answer of `memtune estimate`
// for the seed case (estimate, every rank replayed under both allocator modes, verdicts,
// advice), and the same job on a 40 GB GPU, where both modes run out of memory and each
// verdict's shortfall is found by bisection over replays.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <iostream>

#include "memtune/assess/assess.h"
#include "seed_job.h"

namespace {

using memtune::bench::SeedJob;

void Assess(benchmark::State& state, const memtune::model::Job& job) {
  for (auto _ : state) {
    auto a = memtune::assess::AssessJob(job);
    if (!a) std::abort();
    benchmark::DoNotOptimize(a->verdicts.front().margin_bytes);
  }
}

// The seed case on its H100-80GB: native at risk, expandable fits.
void BM_AssessSeedCase(benchmark::State& state) { Assess(state, SeedJob()); }
BENCHMARK(BM_AssessSeedCase)->Unit(benchmark::kMillisecond);

// The seed case on an A100-40GB: both modes OOM, shortfalls by bisection.
void BM_AssessSeedCaseOom(benchmark::State& state) {
  memtune::model::Job job = SeedJob();
  job.memtune.gpu = "a100-40gb";
  job.memtune.gpu_memory_bytes = 42505273344;
  Assess(state, job);
}
BENCHMARK(BM_AssessSeedCaseOom)->Unit(benchmark::kMillisecond);

}  // namespace
