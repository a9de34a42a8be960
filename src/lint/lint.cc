// LintFiles / LintText: reads each file (script or job document), builds its Context and
// runs the rule groups in order.
#include "memtune/lint/lint.h"

#include <algorithm>
#include <climits>
#include <filesystem>

#include "lint/lint_internal.h"
#include "memtune/core/file.h"

namespace memtune::lint {
namespace {

Status CheckText(const std::string& path, std::string_view text) {
  if (text.size() > kMaxLintFileBytes) {
    return InvalidInput(path, "larger than 1 MiB (" + std::to_string(text.size()) +
                                  " bytes); lint reads launch scripts and job documents up to "
                                  "1 MiB");
  }
  const std::size_t nul = text.find('\0');
  if (nul != std::string_view::npos) {
    return InvalidInput(path, "a binary file (NUL byte at offset " + std::to_string(nul) +
                                  "); allowed: a shell script or a YAML/JSON job");
  }
  return OkStatus();
}

LintFileReader DefaultReader() {
  return [](const std::string& path) {
    return ReadInputFile(path, path, static_cast<std::int64_t>(kMaxLintFileBytes) + 1);
  };
}

bool IsScript(const std::string& path, std::string_view text) {
  for (const char* ext : {".sh", ".bash", ".sbatch", ".slurm"}) {
    if (path.ends_with(ext)) return true;
  }
  return model::LooksLikeLaunchScript(text);
}

Status ReadScript(Context& c, const LintFileReader& read) {
  model::ScriptOptions options;
  options.file_name = c.file;
  options.require_command = false;
  const std::filesystem::path dir = std::filesystem::path(c.file).parent_path();
  options.read_file = [&read, dir](const std::string& name) -> Result<std::string> {
    const std::filesystem::path file(name);
    const std::string full = file.is_absolute() ? name : (dir / file).string();
    MEMTUNE_TRY(std::string text, read(full));
    MEMTUNE_RETURN_IF_ERROR(CheckText(full, text));
    return text;
  };
  Result<model::LaunchScript> script = model::ReadLaunchScript(c.text, options);
  if (!script) {
    Error e = script.error();
    e.field = e.field == "JOB" ? c.file : c.file + " " + e.field;
    return e;
  }
  c.script = std::move(*script);
  if (c.script.command_at.line != 0) {
    c.env = c.script.env;
  } else {
    c.notes->push_back(c.file +
                       ": no training command found (pretrain_*.py, or a *.py with --flags): "
                       "linted the environment only");
    // No training command lint recognizes (an environment file, `python -m module`): what
    // any command would see, the exports and every command's prefixes.
    for (const model::ScriptAssignment& a : c.script.assignments) {
      if ((a.exported || a.prefix) && a.is_static) c.env[a.name] = a.value;
    }
  }
  for (const std::string& n : c.script.notes) c.notes->push_back(c.file + ": " + n);
  return OkStatus();
}

void SortByLine(std::vector<Finding>& findings, std::size_t from) {
  const auto key = [](const Finding& f) {
    return std::pair(f.line == 0 ? INT_MAX : f.line, f.column);
  };
  std::stable_sort(findings.begin() + static_cast<long>(from), findings.end(),
                   [&](const Finding& a, const Finding& b) { return key(a) < key(b); });
}

Status LintOne(const std::string& path, std::string_view text, const LintOptions& options,
               const LintFileReader& read, LintReport& report) {
  MEMTUNE_RETURN_IF_ERROR(CheckText(path, text));
  Context c;
  c.file = path;
  c.text = text;
  c.options = &options;
  c.read = &read;
  c.findings = &report.findings;
  c.notes = &report.notes;
  c.is_script = IsScript(path, text);
  const std::size_t first = report.findings.size();
  if (c.is_script) MEMTUNE_RETURN_IF_ERROR(ReadScript(c, read));
  BuildJob(c);
  EnvRules(c);
  AllocConfRules(c);
  CheckRules(c);
  EstimateRules(c);
  SortByLine(report.findings, first);
  return OkStatus();
}

}  // namespace

Result<LintReport> LintText(const std::string& path, std::string_view text,
                            const LintOptions& options) {
  LintReport report;
  const LintFileReader read = options.read_file ? options.read_file : DefaultReader();
  MEMTUNE_RETURN_IF_ERROR(LintOne(path, text, options, read, report));
  return report;
}

Result<LintReport> LintFiles(const std::vector<std::string>& paths, const LintOptions& options) {
  LintReport report;
  const LintFileReader read = options.read_file ? options.read_file : DefaultReader();
  for (const std::string& path : paths) {
    MEMTUNE_TRY(const std::string text, read(path));
    MEMTUNE_RETURN_IF_ERROR(LintOne(path, text, options, read, report));
  }
  return report;
}

}  // namespace memtune::lint
