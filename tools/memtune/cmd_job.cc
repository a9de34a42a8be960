// memtune job: prints the effective job memtune understood from the inputs.
#include <iostream>

#include "command.h"
#include "commands.h"
#include "job_options.h"
#include "memtune/model/ignored_fields.h"
#include "memtune/model/job_emit.h"

namespace memtune::cli {

int RunJob(int argc, char** argv) {
  CLI::App app(
      "Print the effective job: every field memtune reads, after Megatron-Bridge's rules "
      "(mixed-precision preset, distributed-optimizer sync) and defaults.",
      "memtune job");
  app.footer(
      "Fields that took a default are marked '# default'. The output is itself a job document.\n"
      "\nExamples:\n"
      "  memtune job --example llama3-70b-32xh100\n"
      "  memtune job --model llama3-8b --tp 2 --seq 8192 --world-size 8 --gpu h100\n"
      "  memtune job run.yaml --set mixed_precision=bf16_mixed --format json\n"
      "  memtune job --list-ignored");
  JobFlags flags;
  AddJobOptions(app, flags);
  OutputFormat format = OutputFormat::kText;
  AddFormatOption(app, format);
  bool list_ignored = false;
  app.add_flag("--list-ignored", list_ignored,
               "Print the table of inputs memtune accepts but does not model, and whether each "
               "changes memory (docs/ignored-fields.md)");
  if (int code = ParseArgs(app, argc, argv); code >= 0) return code;
  if (list_ignored) {
    std::cout << model::IgnoredInputsMarkdown();
    return kExitOk;
  }
  auto doc = LoadJob(flags);
  if (!doc) return PrintError("job", doc.error());
  PrintJobNotes("job", *doc, flags.verbose);
  std::cout << (format == OutputFormat::kJson ? model::FormatJobJson(*doc)
                                              : model::FormatJobYaml(*doc));
  return kExitOk;
}

}  // namespace memtune::cli
