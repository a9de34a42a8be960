// memtune validate: predicts measured runs (JSON Lines validation cases) and reports errors.
#include <fstream>
#include <iostream>
#include <sstream>

#include "command.h"
#include "commands.h"
#include "memtune/assess/validate.h"
#include "memtune/core/file.h"
#include "memtune/report/estimate_report.h"

namespace memtune::cli {
int RunValidate(int argc, char** argv) {
  CLI::App app(
      "Predict every validation case of a JSON Lines file (docs/job-format.md section 2) and "
      "report the error against its measurement, with a summary.",
      "memtune validate");
  app.footer(
      "Example:\n  memtune validate measured.jsonl --compare megatron-lm,bridge\n"
      "  memtune validate measured.jsonl --format json\n"
      "  memtune validate measured.jsonl --after-iterations 1   # as Megatron's first memory "
      "report");
  std::string path, compare, rank;
  int after_iterations = 0;
  OutputFormat format = OutputFormat::kText;
  app.add_option("FILE", path, "validation cases, one JSON object per line")->required();
  app.add_option("--compare", compare,
                 "compatibility modes to add side by side: megatron-lm,bridge");
  app.add_option("--rank", rank,
                 "predict this rank for every case instead of its own: max, rank0, last")
      ->check(CLI::IsMember({"max", "rank0", "last"}));
  app.add_option("--after-iterations", after_iterations,
                 "predict each metric as printed by a memory report after N training iterations "
                 "(Megatron's \"(after N iterations) memory\"; 1 excludes Adam's moments until the "
                 "first step) instead of the whole run's peak; accurate mode only")
      ->check(CLI::Range(1, assess::kMaxAfterIterations));
  AddFormatOption(app, format);
  if (int code = ParseArgs(app, argc, argv); code >= 0) return code;

  assess::ValidateOptions options;
  options.rank_override = rank;
  options.after_iterations = after_iterations;
  std::stringstream modes(compare);
  for (std::string name; std::getline(modes, name, ',');) {
    if (name.empty()) continue;
    auto mode = estimate::ParseMode(name, "--compare");
    if (!mode) return PrintError("validate", mode.error());
    options.compare.push_back(*mode);
  }
  auto text = ReadInputFile(path, "FILE");
  if (!text) return PrintError("validate", text.error());
  auto cases = assess::ParseValidationCases(*text, path);
  if (!cases) return PrintError("validate", cases.error());
  const auto report = assess::Validate(*cases, options);
  std::cout << (format == OutputFormat::kJson ? report::RenderValidateJson(report)
                                              : report::RenderValidateText(report));
  return kExitOk;
}

}  // namespace memtune::cli
