// The allocator forecast of `memtune estimate` (docs/synth.md).
#include "estimate_allocator.h"

#include <fstream>

#include "command.h"
#include "memtune/synth/forecast.h"

namespace memtune::cli {

void AddAllocatorOptions(CLI::App& app, AllocatorFlags& f) {
  app.add_option("--emit-trace", f.emit_trace,
                 "Write the synthesized allocation trace of one rank (docs/trace-format.md)")
      ->option_text("FILE");
  app.add_option("--trace-rank", f.trace_rank, "Pipeline rank --emit-trace writes (default: the most loaded)")
      ->option_text("N");
  app.add_option("--iterations", f.iterations, "Training iterations to synthesize and simulate (default 2)")
      ->option_text("N")
      ->check(CLI::Range(1, 100));
  app.add_option("--torch-version", f.torch_version,
                 "PyTorch release whose allocator rules apply: 2.1 to 2.10 or main (default: " +
                     alloc::kDefaultTorchVersion.ToString() + ")");
  app.add_flag("--no-allocator", f.no_allocator, "Skip the allocator simulation (allocated memory only)");
}

namespace {

int WriteTraceFile(const model::Job& job, const AllocatorFlags& f, int rank, int stages,
                   std::optional<std::int64_t> microbatches) {
  if (rank < 0 || rank >= stages) {
    return PrintError("estimate", InvalidInput("--trace-rank", "pipeline rank " + std::to_string(rank) +
                                                                   " does not exist; allowed: 0 to " +
                                                                   std::to_string(stages - 1)));
  }
  std::ofstream out(f.emit_trace, std::ios::binary);
  if (!out) return PrintError("estimate", NotFound("--emit-trace", "cannot write '" + f.emit_trace + "'"));
  synth::SynthOptions so;
  so.iterations = f.iterations;
  so.num_microbatches = microbatches;
  auto synth = synth::TraceSynthesizer::Create(job, so);
  if (!synth) return PrintError("estimate", synth.error());
  synth::WriteTrace(*synth, rank, out);
  return -1;
}

}  // namespace

int RunAllocatorForecast(const model::Job& job, const estimate::Estimate& e, estimate::Mode mode,
                         const AllocatorFlags& f, std::optional<std::int64_t> microbatches,
                         report::EstimateReportContext& ctx) {
  if (mode != estimate::Mode::kAccurate || f.no_allocator) {
    if (f.emit_trace.empty()) return -1;
    return PrintError("estimate", InvalidInput("--emit-trace", "needs --mode accurate and the allocator "
                                                               "simulation (not --no-allocator)"));
  }
  auto version = alloc::ParseTorchVersion(f.torch_version, "--torch-version");
  if (!version) return PrintError("estimate", version.error());
  synth::ForecastOptions options;
  options.synth.iterations = f.iterations;
  options.synth.num_microbatches = microbatches;
  options.capacity_bytes = e.gpu_capacity_bytes;
  options.non_pytorch_bytes = e.non_pytorch_bytes;
  options.torch_version = *version;
  auto forecast = synth::ForecastJob(job, options);
  if (!forecast) {
    if (forecast.error().code != ErrorCode::kUnsupported) return PrintError("estimate", forecast.error());
    const Error& why = forecast.error();
    ctx.forecast_note = "not simulated: " + why.Describe() + (why.hint.empty() ? "" : "; " + why.hint);
    return -1;
  }
  if (!f.emit_trace.empty()) {
    const int rank = f.trace_rank >= 0 ? f.trace_rank : e.peak_pp_rank;
    const int code = WriteTraceFile(job, f, rank, static_cast<int>(forecast->stages.size()), microbatches);
    if (code >= 0) return code;
  }
  ctx.forecast = std::move(*forecast);
  return -1;
}

}  // namespace memtune::cli
