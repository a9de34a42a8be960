// The allocator forecast of `memtune estimate` (docs/synth.md).
#include "allocator_flags.h"

#include <fstream>

#include "command.h"
#include "memtune/synth/forecast.h"

namespace memtune::cli {

void AddAllocatorOptions(CLI::App& app, AllocatorFlags& f) {
  app.add_option("--emit-trace", f.emit_trace,
                 "Write the synthesized allocation trace of one rank (docs/trace-format.md)")
      ->option_text("FILE");
  app.add_option("--trace-rank", f.trace_rank,
                 "Pipeline rank --emit-trace writes (default: the most loaded)")
      ->option_text("N");
  app.add_option("--iterations", f.iterations,
                 "Training iterations to synthesize and simulate (default 2)")
      ->option_text("N")
      ->check(CLI::Range(1, 100));
  f.torch_version_option =
      app.add_option("--torch-version", f.torch_version,
                     "PyTorch release whose allocator rules apply: 2.1 to 2.10 or main (default: "
                     "the job's memtune.versions.torch, else " +
                         alloc::kDefaultTorchVersion.ToString() + ")");
  app.add_flag("--no-allocator", f.no_allocator,
               "Skip the allocator simulation (allocated memory only)");
}

int ApplyAllocatorFlags(const AllocatorFlags& f, assess::AssessOptions& options) {
  const bool simulate = options.estimate.mode == estimate::Mode::kAccurate && !f.no_allocator;
  if (!simulate && !f.emit_trace.empty()) {
    return PrintError("estimate", InvalidInput("--emit-trace",
                                               "needs --mode accurate and the allocator "
                                               "simulation (not --no-allocator)"));
  }
  options.simulate_allocator = simulate;
  options.iterations = f.iterations;
  if (!simulate) return -1;
  // Not given: the job's memtune.versions.torch, else 2.9 (given empty: an error below).
  if (f.torch_version_option == nullptr || f.torch_version_option->count() == 0) return -1;
  auto version = alloc::ParseTorchVersion(f.torch_version, "--torch-version");
  if (!version) return PrintError("estimate", version.error());
  options.torch_version = *version;
  return -1;
}

int WriteTraceIfAsked(const model::Job& job, const assess::Assessment& a, const AllocatorFlags& f,
                      const assess::AssessOptions& options) {
  if (f.emit_trace.empty()) return -1;
  if (!a.forecast) return PrintError("estimate", InvalidInput("--emit-trace", a.forecast_note));
  const int stages = static_cast<int>(a.forecast->stages.size());
  const int rank = f.trace_rank >= 0 ? f.trace_rank : a.estimate.peak_pp_rank;
  if (rank < 0 || rank >= stages) {
    return PrintError("estimate",
                      InvalidInput("--trace-rank", "pipeline rank " + std::to_string(rank) +
                                                       " does not exist; allowed: 0 to " +
                                                       std::to_string(stages - 1)));
  }
  std::ofstream out(f.emit_trace, std::ios::binary);
  if (!out)
    return PrintError("estimate", NotFound("--emit-trace", "cannot write '" + f.emit_trace + "'"));
  synth::SynthOptions so;
  so.iterations = options.iterations;
  so.num_microbatches = options.estimate.num_microbatches;
  auto synth = synth::TraceSynthesizer::Create(job, so);
  if (!synth) return PrintError("estimate", synth.error());
  synth::WriteTrace(*synth, rank, out);
  if (!out.flush()) {
    return PrintError("estimate",
                      InvalidInput("--emit-trace", "writing '" + f.emit_trace + "' failed"));
  }
  return -1;
}

}  // namespace memtune::cli
