// memtune diagnose: from OOM messages, training logs, nvidia-smi output and memory snapshots
// to the cause and the playbook's fixes (the library does the work: memtune/diagnose).
#include <iostream>

#include "command.h"
#include "commands.h"
#include "job_options.h"
#include "memtune/core/file.h"
#include "memtune/diagnose/diagnose.h"
#include "memtune/report/diagnose_report.h"

namespace memtune::cli {
namespace {

Result<std::vector<diagnose::DiagnoseInput>> ReadInputs(const std::vector<std::string>& files) {
  std::vector<diagnose::DiagnoseInput> inputs;
  const std::vector<std::string> names = files.empty() ? std::vector<std::string>{"-"} : files;
  for (const std::string& path : names) {
    const bool is_stdin = path == "-";
    const std::string name = is_stdin ? "<stdin>" : path;
    auto bytes = is_stdin ? ReadInputStream(std::cin, "FILE", name) : ReadInputFile(path, "FILE");
    if (!bytes) return bytes.error();
    MEMTUNE_TRY(auto input, diagnose::ReadDiagnoseInput(name, std::move(*bytes)));
    inputs.push_back(std::move(input));
  }
  return inputs;
}

}  // namespace

int RunDiagnose(int argc, char** argv) {
  CLI::App app(
      "Find why a training job ran out of GPU memory. Reads PyTorch out-of-memory messages of "
      "every release, NCCL/cuBLAS allocation failures, Python tracebacks, Megatron-LM, "
      "torchtitan and DeepSpeed memory lines, configuration errors, nvidia-smi output and "
      "PyTorch memory snapshots (recognised by content, in any mix), and prints one cause "
      "with the numbers behind it and the playbook's fixes in order. With --job it also "
      "predicts each fix's effect and compares the inputs with memtune's estimate.",
      "memtune diagnose");
  app.footer(
      "Causes: fragmentation, capacity_model_state, capacity_activations, other_process, "
      "non_pytorch, leak, imbalance, checkpoint_load, eval_or_generation, config_conflict, "
      "unknown (docs/diagnose.md).\n\nExample:\n  memtune diagnose train.log\n  memtune "
      "diagnose oom.txt --job job.yaml --format json");
  std::vector<std::string> files;
  JobFlags job_flags;
  OutputFormat format = OutputFormat::kText;
  app.add_option("FILE", files, "message, log, nvidia-smi output or snapshot ('-' or none: stdin)");
  AddJobOptions(app, job_flags, JobFileArg::kOption);
  AddFormatOption(app, format);
  if (int code = ParseArgs(app, argc, argv); code >= 0) return code;

  diagnose::DiagnoseOptions options;
  if (NamesJob(job_flags)) {
    auto doc = LoadJob(job_flags);
    if (!doc) return PrintError("diagnose", doc.error());
    PrintJobNotes("diagnose", *doc, job_flags.verbose);
    options.job = doc->job;
  }
  auto inputs = ReadInputs(files);
  if (!inputs) return PrintError("diagnose", inputs.error());
  auto diagnosis = diagnose::Diagnose(*inputs, options);
  if (!diagnosis) return PrintError("diagnose", diagnosis.error());
  std::cout << (format == OutputFormat::kJson ? report::RenderDiagnoseJson(*diagnosis)
                                              : report::RenderDiagnoseText(*diagnosis));
  return kExitOk;
}

}  // namespace memtune::cli
