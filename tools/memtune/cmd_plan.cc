// memtune plan: the changes that make a job fit, ranked by predicted throughput.
#include <iostream>

#include "command.h"
#include "commands.h"
#include "job_options.h"
#include "memtune/plan/plan.h"
#include "memtune/report/plan_report.h"

namespace memtune::cli {

int RunPlan(int argc, char** argv) {
  CLI::App app(
      "Search the layouts and levers a job allows (TP, PP, VPP, CP, EP, micro-batch size, "
      "recompute, optimizer CPU offload, LoRA re-gather, expandable segments), keep what the "
      "checks accept and the allocator simulation says fits, and rank it by predicted "
      "throughput (docs/plan.md).",
      "memtune plan");
  app.footer(
      "Example:\n  memtune plan --example llama3-70b-32xh100\n"
      "  memtune plan job.yaml --gpus 64 --keep model.tensor_model_parallel_size\n"
      "  memtune plan job.yaml --format json");
  JobFlags flags;
  plan::PlanOptions options;
  OutputFormat format = OutputFormat::kText;
  AddJobOptions(app, flags);
  app.add_option(
         "--keep", options.keep,
         "a field to hold at the job's value (repeatable): " +
             [] {
               std::string names;
               for (const std::string& f : plan::PlanFieldNames())
                 names += (names.empty() ? "" : ", ") + f;
               return names;
             }())
      ->option_text("FIELD");
  app.add_option("--limit", options.limit, "fitting candidates to list (default 8)")
      ->check(CLI::Range(1, 100));
  app.add_option("--max-simulations", options.max_simulations,
                 "allocator simulations at most (default 24)")
      ->check(CLI::Range(1, 1000));
  AddFormatOption(app, format);
  if (int code = ParseArgs(app, argc, argv); code >= 0) return code;

  auto doc = LoadJob(flags);
  if (!doc) return PrintError("plan", doc.error());
  PrintJobNotes("plan", *doc, flags.verbose);
  auto plan = plan::PlanJob(doc->job, options);
  if (!plan) return PrintError("plan", plan.error());
  const std::string name = flags.example.empty() ? flags.job_file : "--example " + flags.example;
  std::cout << (format == OutputFormat::kJson ? report::RenderPlanJson(*plan)
                                              : report::RenderPlanText(*plan, name));
  return kExitOk;
}

}  // namespace memtune::cli
