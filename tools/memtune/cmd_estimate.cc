// memtune estimate: per-rank peak memory of a training job, component by component.
#include <iostream>

#include "command.h"
#include "commands.h"
#include "estimate_allocator.h"
#include "job_options.h"
#include "memtune/estimate/estimate.h"
#include "memtune/report/estimate_report.h"

namespace memtune::cli {

int RunEstimate(int argc, char** argv) {
  CLI::App app(
      "Estimate the per-GPU peak allocated memory of a training job, pipeline rank by pipeline "
      "rank: model state, activations held at the schedule peak and transients, against the "
      "GPU capacity.",
      "memtune estimate");
  app.footer(
      "Example:\n  memtune estimate job.yaml\n  memtune estimate job.yaml --mode bridge --format json");
  JobFlags flags;
  std::string mode_name = "accurate";
  std::int64_t microbatches = 0;
  OutputFormat format = OutputFormat::kText;
  AddJobOptions(app, flags);
  app.add_option("--mode", mode_name, "accurate (default), megatron-lm or bridge");
  app.add_option("--microbatches", microbatches,
                 "micro-batches per step (default: global / (micro * data-parallel))")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1000000000}))
      ->option_text("INT");
  AllocatorFlags alloc_flags;  // reserved memory + OOM verdict (estimate_allocator.h)
  AddAllocatorOptions(app, alloc_flags);
  AddFormatOption(app, format);
  if (int code = ParseArgs(app, argc, argv); code >= 0) return code;

  auto mode = estimate::ParseMode(mode_name, "--mode");
  if (!mode) return PrintError("estimate", mode.error());
  auto doc = LoadJob(flags);
  if (!doc) return PrintError("estimate", doc.error());
  PrintJobNotes("estimate", *doc, flags.verbose);
  estimate::EstimateOptions options;
  options.mode = *mode;
  if (microbatches > 0) options.num_microbatches = microbatches;
  auto result = estimate::EstimateMemory(doc->job, options);
  if (!result) return PrintError("estimate", result.error());
  report::EstimateReportContext context{flags.job_file, doc->job.memtune.gpu, doc->defaults_used, {}, {}};
  if (int code = RunAllocatorForecast(doc->job, *result, *mode, alloc_flags, options.num_microbatches, context);
      code >= 0) {
    return code;
  }
  std::cout << (format == OutputFormat::kJson ? report::RenderEstimateJson(*result, context)
                                              : report::RenderEstimateText(*result, context));
  return kExitOk;
}

}  // namespace memtune::cli
