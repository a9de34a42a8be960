// Trace synthesis + allocator simulation speed on the seed case (docs/performance.md,
// "Trace synthesis"): two iterations of the busiest rank of Llama3-70B TP4 PP4 VPP5 DP2.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "memtune/alloc/config.h"
#include "memtune/synth/forecast.h"
#include "seed_job.h"

namespace {

using memtune::bench::SeedJob;

// 512 MiB outside PyTorch from the start (the simulator's work does not depend on how the
// memory outside PyTorch is made up).
const memtune::nonpytorch::NonPytorchMemory& Outside512MiB() {
  static const memtune::nonpytorch::NonPytorchMemory kOutside{
      {{"cuda_context", "cuda_context", 536870912, 536870912, 536870912,
        memtune::nonpytorch::Moment::kStartup, "", true}}};
  return kOutside;
}

// Plan + events of rank 0 (the busiest) straight into a native-mode simulator, 80 GB H100.
void BM_SynthSimulateSeedCase(benchmark::State& state) {
  const memtune::model::Job job = SeedJob();
  auto config = memtune::alloc::ParseAllocatorConfig("");
  for (auto _ : state) {
    auto synth = memtune::synth::TraceSynthesizer::Create(job);
    const auto run = memtune::synth::SimulateRank(*synth, 0, *config, 85520809984, Outside512MiB());
    benchmark::DoNotOptimize(run.peak_reserved_bytes);
  }
}
BENCHMARK(BM_SynthSimulateSeedCase)->Unit(benchmark::kMillisecond);

// The event generator alone (no simulator), to separate the two costs.
void BM_SynthGenerateSeedCase(benchmark::State& state) {
  struct Count : memtune::synth::EventSink {
    std::int64_t n = 0;
    bool OnEvent(const memtune::synth::SynthEvent&) override {
      ++n;
      return true;
    }
  };
  const memtune::model::Job job = SeedJob();
  auto synth = memtune::synth::TraceSynthesizer::Create(job);
  std::int64_t events = 0;
  for (auto _ : state) {
    Count count;
    synth->Synthesize(0, count);
    events = count.n;
  }
  state.counters["events"] = static_cast<double>(events);
}
BENCHMARK(BM_SynthGenerateSeedCase)->Unit(benchmark::kMillisecond);

// FSDP2: torchtitan Llama 3.1 8B on 8 GPUs (tests/golden/estimate/llama3-8b-fsdp2.yaml),
// start-up + two iterations through a native-mode simulator on 96 GB.
void BM_SynthSimulateFsdp2(benchmark::State& state) {
  std::ifstream in(std::string(MEMTUNE_SOURCE_DIR) + "/tests/golden/estimate/llama3-8b-fsdp2.yaml");
  std::stringstream text;
  text << in.rdbuf();
  auto doc = memtune::model::ParseJobText(text.str());
  if (!doc) {
    std::cerr << "fsdp2 job: " << doc.error().Describe() << "\n";
    std::abort();
  }
  auto config = memtune::alloc::ParseAllocatorConfig("");
  std::int64_t events = 0;
  for (auto _ : state) {
    auto synth = memtune::synth::TraceSynthesizer::Create(doc->job);
    const auto run =
        memtune::synth::SimulateRank(*synth, 0, *config, 103079215104, Outside512MiB());
    benchmark::DoNotOptimize(run.peak_reserved_bytes);
    struct Count : memtune::synth::EventSink {
      std::int64_t n = 0;
      bool OnEvent(const memtune::synth::SynthEvent&) override {
        ++n;
        return true;
      }
    } count;
    if (events == 0) {
      synth->Synthesize(0, count);
      events = count.n;
    }
  }
  state.counters["events"] = static_cast<double>(events);
}
BENCHMARK(BM_SynthSimulateFsdp2)->Unit(benchmark::kMillisecond);

}  // namespace
