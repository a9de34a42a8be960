// memtune lint: the memory mistakes in a launch script, found before the job is queued.
//
// A file is a bash / Slurm sbatch launch script (read by model::ReadLaunchScript, the one
// script reader) or a YAML/JSON job document (read by model::ComposeJob). Lint looks at
//   - the environment the training command sees: the allocator variables, parsed by the one
//     allocator-config interpretation (alloc::AllocatorConfigFromEnv / ParseAllocatorConfig)
//     with the accepted spellings and precedence of the file's PyTorch release
//     (LintOptions::torch_version, else a job document's memtune.versions.torch), and the
//     NCCL variables PyTorch and Megatron-LM read;
//   - where those variables are set (after the training command, never exported);
//   - the job the command describes (Megatron-LM flags, Bridge dotted overrides such as
//     `model.tensor_model_parallel_size=8`), run through every `memtune check` rule
//     (model::CheckJob), each finding mapped back to the script line of its flag;
//   - with LintOptions::estimate, the job's predicted verdict per allocator mode
//     (assess::AssessJob): an OOM is a finding.
// Rules are data (ListLintRules); docs/lint-rules.md is generated from the table.
// Nothing is executed; files are read only through LintOptions::read_file.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/alloc/config.h"
#include "memtune/core/result.h"

namespace memtune::lint {

// kError: the job fails at start (PyTorch or Megatron raises). kWarning: it runs, but a
// setting is silently ignored, or is likely wrong or costly. kInfo: worth knowing.
enum class Severity { kError, kWarning, kInfo };

// "error", "warning", "info".
const char* SeverityName(Severity severity);

// The upstream code (or document) a rule rests on.
struct SourceRef {
  std::string_view repo;     // "pytorch/pytorch", "NVIDIA/Megatron-LM", "GNU Bash manual"
  std::string_view path;     // file and function, e.g. "c10/core/AllocatorConfig.cpp parseArgs"
  std::string_view version;  // commit, release or date, e.g. "d98e8a64 (2026-08-22)"
};

// One row of the rule table (`memtune lint --list-rules`).
struct LintRule {
  std::string_view id;  // stable: "<area>.<name>", e.g. "alloc-conf.bool-case"
  Severity severity;
  std::string_view what;     // the condition lint checks, one line
  std::string_view runtime;  // what happens at run time: error, silently ignored, slower
  std::string_view fix;      // the generic fix
  SourceRef source;
};

// One finding: where, what, what happens and how to fix it.
struct Finding {
  std::string rule;  // LintRule::id, or "check.<id>" for a `memtune check` rule
  Severity severity = Severity::kWarning;
  std::string file;     // as given to LintFiles (a sourced file: as `source` named it)
  int line = 0;         // 1-based; 0 when the finding has no line (a job-wide verdict)
  int column = 0;       // 1-based, in bytes; 0 with line 0
  std::string text;     // the offending text as written, e.g. "expandable_segments:true"
  std::string message;  // what is wrong and what happens at run time, with the values
  std::string fix;      // what to change, with values
  std::string source_repo, source_path, source_version;  // LintRule::source (or check's)
};

struct LintReport {
  std::vector<Finding> findings;  // per file in the order given, each in line order
  // What the readers noted (approximations, unread `source` files), "<file>: <note>".
  std::vector<std::string> notes;
};

// Reads the file at `path` (also the files `source` names, resolved against the script's
// folder by LintFiles). Errors: kNotFound / kInvalidInput naming the path.
using LintFileReader = std::function<Result<std::string>(const std::string& path)>;

struct LintOptions {
  // The PyTorch release whose allocator parser, spellings and variable precedence apply;
  // nullopt: a job document's memtune.versions.torch, else alloc::kDefaultTorchVersion.
  std::optional<alloc::TorchVersion> torch_version;
  // GPU catalog name (e.g. "h100-sxm-80gb") for GPU-dependent rules and the estimate; "" = the
  // job's own memtune.gpu (a script gives none).
  std::string gpu;
  // Also predict the job's verdict per allocator mode (slow: simulates the allocator).
  bool estimate = false;
  // Reads files. Default (nullptr): the local file system, up to kMaxLintFileBytes.
  LintFileReader read_file;
};

// bytes (1 MiB): the largest file lint reads, as model::ReadLaunchScript takes.
inline constexpr std::size_t kMaxLintFileBytes = 1 << 20;

// Lints each file in `paths`. A file that does not look like a shell script
// (model::LooksLikeLaunchScript) is read as a job document.
// Errors (the first bad file stops the run; one line each): kNotFound for an unreadable
// file; kInvalidInput, field = the path, for a binary file (a NUL byte), a file over
// kMaxLintFileBytes, and the script reader's errors ("line N: unterminated ' quote",
// nesting too deep); a job document that does not parse is a finding (job.not-built), not
// an error.
// Example:
//   auto report = LintFiles({"train.sh"}, {.torch_version = {2, 8}});
//   report->findings[0].rule == "env.after-command"
Result<LintReport> LintFiles(const std::vector<std::string>& paths,
                             const LintOptions& options = {});

// Lints one file's text, named `path` in findings (for tests, fuzzing and bindings).
// Same errors as LintFiles. `source` in a script reads through options.read_file.
Result<LintReport> LintText(const std::string& path, std::string_view text,
                            const LintOptions& options = {});

// The lint-specific rules, in table order. Ids are unique and never reused.
std::span<const LintRule> ListLintRules();

// The rule `id` ("check.<id>" included, from model::ListRules), or nullopt-like nullptr
// when unknown. The returned pointer of a check rule stays valid for the process.
const LintRule* FindLintRule(std::string_view id);

// Number of findings with severity kError.
int CountErrors(const std::vector<Finding>& findings);

}  // namespace memtune::lint
