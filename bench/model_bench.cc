// Job composer speed: a document and a Megatron-LM command through ComposeJob, the reader
// every job input goes through (docs/limits.md, "The long campaign").
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "memtune/model/examples.h"
#include "memtune/model/job_compose.h"

namespace {

std::string ReadSourceFile(const std::string& relative) {
  std::ifstream in(std::string(MEMTUNE_SOURCE_DIR) + "/" + relative);
  if (!in) std::abort();
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void Compose(benchmark::State& state, const memtune::model::JobInputs& inputs) {
  if (!memtune::model::ComposeJob(inputs).has_value()) std::abort();
  for (auto _ : state) {
    auto doc = memtune::model::ComposeJob(inputs);
    benchmark::DoNotOptimize(doc);
  }
  state.SetItemsProcessed(state.iterations());
}

// The README's example job (a short memtune document).
void BM_ComposeExampleJob(benchmark::State& state) {
  auto text = memtune::model::ExampleJobYaml("llama3-70b-32xh100");
  if (!text) std::abort();
  memtune::model::JobInputs inputs;
  inputs.document = *text;
  Compose(state, inputs);
}
BENCHMARK(BM_ComposeExampleJob);

// A full Megatron-Bridge config dump (every field of every section).
void BM_ComposeBridgeDump(benchmark::State& state) {
  memtune::model::JobInputs inputs;
  inputs.document = ReadSourceFile("tests/golden/job/bridge_dump_full.yaml");
  Compose(state, inputs);
}
BENCHMARK(BM_ComposeBridgeDump);

// A short Megatron-LM command: its flags, every other field at Megatron-LM's defaults.
void BM_ComposeMegatronArgs(benchmark::State& state) {
  memtune::model::JobInputs inputs;
  inputs.megatron_args =
      "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
      "--max-position-embeddings 128 --micro-batch-size 1 --global-batch-size 1 "
      "--vocab-size 256 --bf16";
  Compose(state, inputs);
}
BENCHMARK(BM_ComposeMegatronArgs);

}  // namespace
