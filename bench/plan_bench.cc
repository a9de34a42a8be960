// Planner speed (docs/performance.md, "Planner"): the whole search of a 1,024-GPU job (every
// divisor layout times the levers, checked, timed and sized analytically, the best simulated),
// and the step-time model on its own (what the analytic pass spends per candidate).
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "memtune/plan/plan.h"
#include "memtune/steptime/step_time.h"
#include "seed_job.h"

namespace {

// The seed case (Llama3-70B FP8-CS, TP4 PP4 VPP5) on 1,024 H100s: DP 64, GBS 1,024.
memtune::model::Job Job1024() {
  memtune::model::Job job = memtune::bench::SeedJob();
  job.memtune.world_size = 1024;
  job.train.global_batch_size = 1024;
  return job;
}

void BM_PlanSearch1024Gpus(benchmark::State& state) {
  const memtune::model::Job job = Job1024();
  int searched = 0, simulated = 0;
  for (auto _ : state) {
    auto plan = memtune::plan::PlanJob(job);
    if (!plan || plan->candidates.empty()) std::abort();
    searched = plan->searched;
    simulated = plan->simulated;
    benchmark::DoNotOptimize(plan->candidates.front().relative_throughput);
  }
  state.counters["candidates"] = searched;
  state.counters["simulated"] = simulated;
}
BENCHMARK(BM_PlanSearch1024Gpus)->Unit(benchmark::kMillisecond);

// The same search with one ranked candidate simulated (the current job and the playbook's
// alternatives are simulated still): what the analytic pass costs, by difference.
void BM_PlanOneRankedSimulation1024Gpus(benchmark::State& state) {
  const memtune::model::Job job = Job1024();
  memtune::plan::PlanOptions options;
  options.max_simulations = 1;
  options.limit = 1;
  int simulated = 0;
  for (auto _ : state) {
    auto plan = memtune::plan::PlanJob(job, options);
    if (!plan) std::abort();
    simulated = plan->simulated;
    benchmark::DoNotOptimize(plan->searched);
  }
  state.counters["simulated"] = simulated;
}
BENCHMARK(BM_PlanOneRankedSimulation1024Gpus)->Unit(benchmark::kMillisecond);

void BM_StepTimeSeed(benchmark::State& state) {
  const memtune::model::Job job = memtune::bench::SeedJob();
  for (auto _ : state) {
    auto step = memtune::steptime::PredictStepTime(job);
    if (!step) std::abort();
    benchmark::DoNotOptimize(step->step_time_s);
  }
}
BENCHMARK(BM_StepTimeSeed)->Unit(benchmark::kMicrosecond);

}  // namespace
