// memtune estimate: per-rank peak memory of a training job, component by component.
#include <iostream>

#include "allocator_flags.h"
#include "command.h"
#include "commands.h"
#include "job_options.h"
#include "memtune/assess/assess.h"
#include "memtune/model/job_summary.h"
#include "memtune/report/estimate_report.h"

namespace memtune::cli {

int RunEstimate(int argc, char** argv) {
  CLI::App app(
      "Estimate the per-GPU peak allocated memory of a training job, pipeline rank by pipeline "
      "rank: model state, activations held at the schedule peak and transients, against the "
      "GPU capacity.",
      "memtune estimate");
  app.footer(
      "Example:\n  memtune estimate job.yaml\n  memtune estimate job.yaml --mode bridge --format "
      "json");
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
  AllocatorFlags alloc_flags;  // reserved memory + OOM verdict (allocator_flags.h)
  AddAllocatorOptions(app, alloc_flags);
  AddFormatOption(app, format);
  if (int code = ParseArgs(app, argc, argv); code >= 0) return code;

  auto mode = estimate::ParseMode(mode_name, "--mode");
  if (!mode) return PrintError("estimate", mode.error());
  auto doc = LoadJob(flags);
  if (!doc) return PrintError("estimate", doc.error());
  PrintJobNotes("estimate", *doc, flags.verbose);
  assess::AssessOptions options;
  options.estimate.mode = *mode;
  if (microbatches > 0) options.estimate.num_microbatches = microbatches;
  if (int code = ApplyAllocatorFlags(alloc_flags, options); code >= 0) return code;
  auto assessment = assess::AssessJob(doc->job, options);
  if (!assessment) return PrintError("estimate", assessment.error());
  if (int code = WriteTraceIfAsked(doc->job, *assessment, alloc_flags, options); code >= 0)
    return code;
  const report::EstimateReportContext context{flags.job_file, doc->job.memtune.gpu,
                                              doc->defaults_used, model::DescribePrecision(*doc),
                                              model::DescribeParameters(doc->job)};
  std::cout << (format == OutputFormat::kJson ? report::RenderEstimateJson(*assessment, context)
                                              : report::RenderEstimateText(*assessment, context));
  return kExitOk;
}

}  // namespace memtune::cli
