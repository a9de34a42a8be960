// The lint rule table. Each row cites the code it rests on, read for
// ../shared/docs/lint-rules.md (PyTorch, Megatron-LM d98e8a64, Megatron-Bridge 067f987);
// docs/lint-rules.md is generated from it (`memtune lint --list-rules --format markdown`).
#include <deque>

#include "lint/lint_internal.h"
#include "memtune/model/checks.h"

namespace memtune::lint {
namespace {

constexpr SourceRef kBash{"GNU Bash Reference Manual", "3.7.4 Environment; 4.1 export", "bash 5.2"};
constexpr SourceRef kPtBool{"pytorch/pytorch",
                            "c10/core/AllocatorConfig.h ConfigTokenizer::toBool; "
                            "c10/cuda/CUDAAllocatorConfig.cpp parseArgs",
                            "2.1-2.8 and main, late 2025"};
constexpr SourceRef kPtTokenizer{
    "pytorch/pytorch", "c10/core/AllocatorConfig.h ConfigTokenizer, skipKey", "main, late 2025"};
constexpr SourceRef kPtUnknown{"pytorch/pytorch",
                               "c10/cuda/CUDAAllocatorConfig.cpp parseArgs (unknown key)",
                               "2.8 (own lexer); 01f9ef32 (2.9)"};
constexpr SourceRef kPtParse{"pytorch/pytorch",
                             "c10/core/AllocatorConfig.cpp parseMaxSplitSize, "
                             "parseGarbageCollectionThreshold, parseRoundUpPower2Divisions",
                             "main, late 2025; 2.8"};
constexpr SourceRef kPtMaxSplit{"pytorch/pytorch", "issues #119452, #123548; PR #193400",
                                "2024-02-15, 2024-04-08, 2026-08"};
constexpr SourceRef kPtWarn{"pytorch/pytorch",
                            "c10/cuda/CUDAAllocatorConfig.cpp parseAllocatorConfig (TORCH_WARN)",
                            "01f9ef32 (2.9)"};
constexpr SourceRef kPtPrecedence{"pytorch/pytorch",
                                  "c10/core/AllocatorConfig.cpp AcceleratorAllocatorConfig::"
                                  "instance(); c10/cuda/CUDAAllocatorConfig.h instance()",
                                  "2.9 to 2026 main"};
constexpr SourceRef kPtNewName{"pytorch/pytorch", "issue #183387; karpathy/autoresearch PR #588",
                               "2.9.1 (fixed in 2.11.0)"};
constexpr SourceRef kMlmGuard{"NVIDIA/Megatron-LM",
                              "megatron/core/distributed/distributed_data_parallel_config.py:"
                              "262-267; megatron/training/arguments.py:1960-1968",
                              "d98e8a64 (2026-08-22)"};
constexpr SourceRef kPtPg{"pytorch/pytorch",
                          "torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp "
                          "TORCH_NCCL_AVOID_RECORD_STREAMS",
                          "main (index copy 5600466)"};
constexpr SourceRef kAssess{"memtune", "docs/assess.md (AssessJob verdict per allocator mode)",
                            "this release"};
constexpr SourceRef kMemtuneJob{"memtune", "docs/job-format.md; model/job_compose.h",
                                "this release"};

constexpr LintRule kRules[] = {
    {kRuleAfterCommand, Severity::kWarning,
     "a memory variable (allocator, NCCL) is assigned or exported after the training command",
     "silently ignored: the training process started before the assignment and never sees it",
     "move the assignment above the training command and export it", kBash},
    {kRuleNotExported, Severity::kWarning,
     "a memory variable is set as a shell variable (or as the prefix of another command) but "
     "never exported to the training command",
     "silently ignored: the training process does not inherit unexported variables",
     "write `export NAME=value` before the training command", kBash},
    {kRuleBoolCase, Severity::kError,
     "a True/False allocator option is not spelled exactly True or False (e.g. `true`, `1`)",
     "error at the first CUDA allocation: PyTorch compares booleans case-sensitively",
     "spell the value True or False", kPtBool},
    {kRuleEquals, Severity::kError, "`=` instead of `:` between an allocator option and its value",
     "error at the first CUDA allocation: `key=value` is read as one unknown key",
     "write option:value, e.g. expandable_segments:True", kPtTokenizer},
    {kRuleUnknownOption, Severity::kError,
     "an allocator option this PyTorch release does not know (typo, or newer/older than it)",
     "error at the first CUDA allocation: PyTorch rejects unknown keys",
     "fix the spelling, or drop the option for this release", kPtUnknown},
    {kRuleInvalid, Severity::kError,
     "an allocator option value PyTorch rejects (max_split_size_mb < 20, a GC threshold "
     "outside (0, 1), malformed roundup_power2_divisions, ...)",
     "error at the first CUDA allocation, with PyTorch's message", "use a value in range",
     kPtParse},
    {kRuleMaxSplitExpandable, Severity::kWarning,
     "max_split_size_mb together with expandable_segments:True",
     "runs, but the combination is not meaningful and has broken repeatedly (internal assert, "
     "reserved memory growing without bound on 2.12+)",
     "drop max_split_size_mb when expandable segments are on", kPtMaxSplit},
    {kRulePytorchWarning, Severity::kInfo,
     "PyTorch prints a warning while parsing the allocator config (e.g. cudaMallocAsync "
     "ignores the native options)",
     "runs; the options named are ignored", "drop the ignored options", kPtWarn},
    {kRuleBothDiffer, Severity::kWarning,
     "PYTORCH_ALLOC_CONF and PYTORCH_CUDA_ALLOC_CONF are both set, with different values",
     "runs with one configuration split across the two variables: the device-generic options "
     "come from one, the CUDA-specific ones from the other",
     "set one variable, or both to the same string", kPtPrecedence},
    {kRuleNewNameOnly, Severity::kWarning,
     "only PYTORCH_ALLOC_CONF is set, on a PyTorch that does not read it (before 2.9) or was "
     "reported to ignore it on CUDA (2.9.1)",
     "silently ignored: the allocator runs with its defaults",
     "set PYTORCH_CUDA_ALLOC_CONF (or both, with the same string)", kPtNewName},
    {kRuleWhitespace, Severity::kInfo, "whitespace inside an allocator config value",
     "PyTorch drops the spaces, but Megatron-LM's guards compare items exactly and miss the "
     "option",
     "remove the spaces", kMlmGuard},
    {kRuleGuardBypass, Severity::kWarning,
     "expandable segments are on, with --use-nccl-ub or CUDA graphs, in a form Megatron-LM's "
     "guard does not see (PYTORCH_ALLOC_CONF, spaces)",
     "Megatron-LM starts instead of stopping with its ValueError / assert, and the run then "
     "fails or corrupts memory (MemPool, illegal memory access)",
     "spell it expandable_segments:True in PYTORCH_CUDA_ALLOC_CONF and resolve the conflict "
     "the guard reports",
     kMlmGuard},
    {kRuleAvoidRecordStreams, Severity::kWarning,
     "NCCL_AVOID_RECORD_STREAMS without the TORCH_ prefix",
     "silently ignored: ProcessGroupNCCL reads only TORCH_NCCL_AVOID_RECORD_STREAMS",
     "rename it TORCH_NCCL_AVOID_RECORD_STREAMS", kPtPg},
    {kRuleJobNotBuilt, Severity::kInfo,
     "the job could not be built from the file (an unset variable, an unknown flag value), so "
     "the check rules and the estimate did not run",
     "nothing at run time; lint checked the environment only",
     "set the variables named (or lint a job document)", kMemtuneJob},
    {kRuleOom, Severity::kError,
     "--estimate: the simulated allocator runs out of memory in an allocator mode",
     "the job OOMs on the rank named (error for the job's own mode, warning for the other)",
     "follow `memtune plan` (or the fix named) to make it fit", kAssess},
    {kRuleAtRisk, Severity::kWarning,
     "--estimate: the job fits by less than the prediction's uncertainty",
     "may OOM: the margin is within the prediction's error", "see `memtune plan` for more room",
     kAssess},
};

// The check rules as lint rules: "check.<id>", stored once for the process.
const std::vector<LintRule>& CheckRuleTable() {
  static const std::vector<LintRule>* rules = [] {
    static std::deque<std::string> text;
    auto* out = new std::vector<LintRule>;
    for (const model::RuleInfo& r : model::ListRules()) {
      if (r.id == kSkippedCheckRule) continue;
      text.push_back("check." + std::string(r.id));
      const std::string_view id = text.back();
      text.push_back(std::string(r.source));
      const bool error = r.severity == model::Severity::kError;
      out->push_back({id, error ? Severity::kError : Severity::kWarning, r.what,
                      error ? "error at start: upstream raises or asserts"
                            : "runs; a setting is ignored, costly, or upstream warns",
                      r.fix, SourceRef{"memtune check (docs/checks.md)", text.back(), ""}});
    }
    return out;
  }();
  return *rules;
}

}  // namespace

const char* SeverityName(Severity severity) {
  switch (severity) {
    case Severity::kError:
      return "error";
    case Severity::kWarning:
      return "warning";
    case Severity::kInfo:
      return "info";
  }
  return "error";
}

std::span<const LintRule> ListLintRules() { return kRules; }

std::span<const LintRule> ListCheckLintRules() { return CheckRuleTable(); }

const LintRule* FindLintRule(std::string_view id) {
  for (const LintRule& r : kRules) {
    if (r.id == id) return &r;
  }
  for (const LintRule& r : CheckRuleTable()) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

int CountErrors(const std::vector<Finding>& findings) {
  int n = 0;
  for (const Finding& f : findings) n += f.severity == Severity::kError ? 1 : 0;
  return n;
}

Finding MakeFinding(std::string_view rule_id, const Place& place, std::string message,
                    std::string fix) {
  const LintRule* rule = FindLintRule(rule_id);
  Finding f;
  f.rule = std::string(rule_id);
  if (rule != nullptr) {
    f.severity = rule->severity;
    f.source_repo = rule->source.repo;
    f.source_path = rule->source.path;
    f.source_version = rule->source.version;
    if (fix.empty()) fix = rule->fix;
  }
  f.file = place.file;
  f.line = place.line;
  f.column = place.column;
  f.text = place.text;
  f.message = std::move(message);
  f.fix = std::move(fix);
  return f;
}

}  // namespace memtune::lint
