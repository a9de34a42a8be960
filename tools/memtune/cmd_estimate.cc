// memtune estimate: per-rank peak memory of a training job, component by component, and
// (accurate mode) the reserved memory and OOM verdict of the simulated caching allocator.
#include <fstream>
#include <iostream>

#include "command.h"
#include "commands.h"
#include "job_options.h"
#include "memtune/estimate/estimate.h"
#include "memtune/report/estimate_report.h"
#include "memtune/synth/forecast.h"

namespace memtune::cli {
namespace {

struct AllocatorFlags {
  std::string emit_trace;  // --emit-trace FILE
  int trace_rank = -1;     // --trace-rank N (default: the most loaded rank)
  int iterations = 2;
  std::string torch_version = alloc::kDefaultTorchVersion.ToString();
  bool no_allocator = false;
};

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

// Synthesizes and simulates every rank; writes the trace when asked. Errors go to stderr.
int RunAllocator(const model::Job& job, const estimate::Estimate& e, const AllocatorFlags& f,
                 std::optional<std::int64_t> microbatches, report::EstimateReportContext& ctx) {
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
    if (forecast.error().code == ErrorCode::kUnsupported) {
      ctx.forecast_note = "not simulated: " + forecast.error().Describe();
      return -1;
    }
    return PrintError("estimate", forecast.error());
  }
  if (!f.emit_trace.empty()) {
    const int rank = f.trace_rank >= 0 ? f.trace_rank : e.peak_pp_rank;
    if (rank >= static_cast<int>(forecast->stages.size())) {
      return PrintError("estimate", InvalidInput("--trace-rank", "pipeline rank " + std::to_string(rank) +
                                                                     " does not exist; allowed: 0 to " +
                                                                     std::to_string(forecast->stages.size() - 1)));
    }
    std::ofstream out(f.emit_trace, std::ios::binary);
    if (!out) return PrintError("estimate", NotFound("--emit-trace", "cannot write '" + f.emit_trace + "'"));
    synth::SynthOptions so;
    so.iterations = f.iterations;
    so.num_microbatches = microbatches;
    auto synth = synth::TraceSynthesizer::Create(job, so);
    if (!synth) return PrintError("estimate", synth.error());
    synth::WriteTrace(*synth, rank, out);
  }
  ctx.forecast = std::move(*forecast);
  return -1;
}

}  // namespace

int RunEstimate(int argc, char** argv) {
  CLI::App app(
      "Estimate the per-GPU peak allocated memory of a training job, pipeline rank by pipeline "
      "rank: model state, activations held at the schedule peak and transients; then replay "
      "each rank's synthesized allocation trace through the caching-allocator simulator to "
      "predict reserved memory and whether the job runs out of memory, under the job's "
      "PYTORCH_CUDA_ALLOC_CONF and the other segment mode.",
      "memtune estimate");
  app.footer(
      "Example:\n  memtune estimate --example llama3-70b-32xh100\n  memtune estimate job.yaml --mode bridge "
      "--format json\n  memtune estimate job.yaml --emit-trace rank0.trace --trace-rank 0");
  JobFlags job_flags;
  AddJobOptions(app, job_flags);
  std::string mode_name = "accurate";
  std::int64_t microbatches = 0;
  OutputFormat format = OutputFormat::kText;
  AllocatorFlags alloc_flags;
  app.add_option("--mode", mode_name, "accurate (default), megatron-lm or bridge");
  app.add_option("--microbatches", microbatches,
                 "micro-batches per step (default: global / (micro * data-parallel))");
  AddAllocatorOptions(app, alloc_flags);
  AddFormatOption(app, format);
  if (int code = ParseArgs(app, argc, argv); code >= 0) return code;

  auto mode = estimate::ParseMode(mode_name, "--mode");
  if (!mode) return PrintError("estimate", mode.error());
  if (job_flags.job_file.empty() && job_flags.example.empty()) {
    return PrintError("estimate", InvalidInput("JOB", "no job given; pass a job file or --example NAME"));
  }
  auto doc = LoadJob(job_flags);
  if (!doc) return PrintError("estimate", doc.error());
  PrintJobNotes("estimate", *doc, job_flags.verbose);
  estimate::EstimateOptions options;
  options.mode = *mode;
  if (microbatches > 0) options.num_microbatches = microbatches;
  auto result = estimate::EstimateMemory(doc->job, options);
  if (!result) return PrintError("estimate", result.error());
  const std::string name = job_flags.job_file.empty() ? "example " + job_flags.example : job_flags.job_file;
  report::EstimateReportContext context{name, doc->job.memtune.gpu, doc->defaults_used, std::nullopt, ""};
  if (*mode == estimate::Mode::kAccurate && !alloc_flags.no_allocator) {
    if (int code = RunAllocator(doc->job, *result, alloc_flags, options.num_microbatches, context); code >= 0) {
      return code;
    }
  } else if (!alloc_flags.emit_trace.empty()) {
    return PrintError("estimate", InvalidInput("--emit-trace", "needs --mode accurate and the allocator simulation"));
  }
  std::cout << (format == OutputFormat::kJson ? report::RenderEstimateJson(*result, context)
                                              : report::RenderEstimateText(*result, context));
  return kExitOk;
}

}  // namespace memtune::cli
