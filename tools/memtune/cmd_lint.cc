// memtune lint: memory mistakes in launch scripts and job documents, found before the job
// is queued (lint/lint.h; the rules are docs/lint-rules.md).
#include <iostream>
#include <string>
#include <vector>

#include "command.h"
#include "commands.h"
#include "memtune/lint/lint.h"
#include "memtune/lint/render.h"

namespace memtune::cli {

int RunLint(int argc, char** argv) {
  CLI::App app(
      "Lint launch scripts (bash, Slurm sbatch: export, VAR=value prefixes, torchrun/srun "
      "lines, continuations, variables, `source`) and job documents for memory mistakes: "
      "allocator settings PyTorch rejects or silently ignores, variables set after the "
      "training command or never exported, Megatron-LM guards that are bypassed, and every "
      "`memtune check` rule on the job the command describes, each at the line of its flag. "
      "Exit code 1 when a finding is an error, 0 otherwise, 2 for unreadable or bad input "
      "(binary, over 1 MiB, an unterminated quote).",
      "memtune lint");
  app.footer(
      "Example:\n  memtune lint train.sh\n  memtune lint train.sh --torch-version 2.8 --gpu "
      "h100-sxm-80gb --estimate\n  memtune lint train.sh --format sarif > lint.sarif\n  memtune "
      "lint --list-rules --format markdown");
  std::vector<std::string> files;
  app.add_option("FILE", files, "Launch scripts or job documents (YAML/JSON)");
  std::string format = "text";
  app.add_option("--format", format, "Output format")
      ->check(CLI::IsMember({"text", "json", "sarif", "markdown"}))
      ->capture_default_str();
  std::string version;
  CLI::Option* version_option = app.add_option(
      "--torch-version", version,
      "PyTorch release whose allocator spellings and precedence apply: 2.1 to 2.10 or main "
      "(default: a job document's memtune.versions.torch, else " +
          alloc::kDefaultTorchVersion.ToString() + ")");
  lint::LintOptions options;
  app.add_option("--gpu", options.gpu, "GPU catalog name for GPU-dependent rules and --estimate");
  app.add_flag("--estimate", options.estimate,
               "Also predict the job's verdict per allocator mode (an OOM is a finding)");
  bool list_rules = false;
  app.add_flag("--list-rules", list_rules,
               "Print the rule table (text, json or markdown; no FILE needed)");
  if (int code = ParseArgs(app, argc, argv); code >= 0) return code;

  if (list_rules) {
    std::cout << (format == "json"       ? lint::RenderRulesJson()
                  : format == "markdown" ? lint::RenderRulesMarkdown()
                                         : lint::RenderRulesText());
    return kExitOk;
  }
  if (files.empty()) {
    return PrintError("lint", InvalidInput("FILE", "no file given", "memtune lint train.sh"));
  }
  if (format == "markdown") {
    return PrintError("lint", InvalidInput("--format", "markdown is for --list-rules only",
                                           "use text, json or sarif"));
  }
  if (version_option->count() > 0) {  // given empty: ParseTorchVersion's error
    auto parsed = alloc::ParseTorchVersion(version, "--torch-version");
    if (!parsed) return PrintError("lint", parsed.error());
    options.torch_version = *parsed;
  }
  Result<lint::LintReport> report = lint::LintFiles(files, options);
  if (!report) return PrintError("lint", report.error());
  for (const std::string& note : report->notes) PrintWarning("lint", note);
  std::cout << (format == "json"    ? lint::RenderJson(*report)
                : format == "sarif" ? lint::RenderSarif(*report)
                                    : lint::RenderText(*report, static_cast<int>(files.size())));
  return lint::CountErrors(report->findings) > 0 ? kExitFindings : kExitOk;
}

}  // namespace memtune::cli
