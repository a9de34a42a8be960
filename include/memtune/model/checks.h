// Validation of a job against the rules Megatron-Core, Megatron-LM, Megatron-Bridge (and
// torchtitan, for FSDP2 jobs) enforce on memory and parallelism settings, plus the
// memory-tuning playbook's compatibility constraints (docs/checks.md lists every rule).
//
// The rules are data: a table of (id, severity, source, what, fix, predicate). CheckJob
// runs every rule and reports every violation at once; it never stops at the first.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memtune/model/job.h"

namespace memtune::model {

// kError: the job cannot run as written (upstream raises or asserts).
// kWarning: the job runs, but a setting is ignored, costly, or upstream warns about it.
enum class Severity { kError, kWarning };

// "error" or "warning".
const char* SeverityName(Severity severity);

// Which frameworks a rule applies to (memtune.framework).
enum class RuleScope {
  kAll,       // Megatron jobs and FSDP2 jobs
  kMegatron,  // Megatron-LM / Megatron-Bridge jobs only
  kFsdp2,     // torchtitan-style FSDP2 jobs only
};

// The static description of one rule (one row of `memtune check --list-rules`).
struct RuleInfo {
  std::string_view id;  // stable, "<area>.<name>", e.g. "offload.pp"
  Severity severity;
  RuleScope scope;
  std::string_view what;    // one line: the constraint, e.g. "cpu_offloading requires PP == 1"
  std::string_view fix;     // the generic fix
  std::string_view source;  // the upstream rule it reproduces, e.g.
                            // "MCore TransformerConfig.__post_init__"
  // For an error: the violation does not change any memory figure (an environment variable
  // upstream requires, say), so the estimator still runs and reports it (see BlocksEstimate).
  // Every other error blocks the estimate.
  bool memory_neutral = false;
};

// One violated rule, with the job's offending values.
struct Finding {
  std::string rule_id;  // RuleInfo::id
  Severity severity = Severity::kError;
  // Document path -> effective value, e.g. {"model.pipeline_model_parallel_size", "4"}.
  std::vector<std::pair<std::string, std::string>> fields;
  std::string message;  // what is wrong, with the values (upstream's text where it has one)
  std::string fix;      // what to change, naming fields and values
  std::string source;   // RuleInfo::source
};

// Runs every rule that applies to the job's framework and returns every violation, in
// rule-table order (errors and warnings interleaved as the table lists them). An empty
// result means the job passes. Never fails: a rule whose inputs are out of range (e.g. a
// zero parallel size) is skipped, and "layout.positive-sizes" reports the bad input.
//
// Example:
//   std::vector<Finding> findings = CheckJob(job);
//   bool ok = CountErrors(findings) == 0;
std::vector<Finding> CheckJob(const Job& job);

// The rule table, in the order CheckJob runs it. Ids are unique.
std::span<const RuleInfo> ListRules();

// Number of findings with severity kError.
int CountErrors(const std::vector<Finding>& findings);

// True for the error rules not marked memory_neutral: upstream refuses such a job (an
// assert, a ValueError, argparse), so no memory figure belongs to it and the estimator
// (estimate::EstimateMemory, and so validate and plan) refuses it with the rule's own message.
// False for warnings, memory-neutral errors and an unknown id.
bool BlocksEstimate(std::string_view rule_id);

// The findings of CheckJob(job) for which BlocksEstimate holds, in table order.
std::vector<Finding> StructuralErrors(const Job& job);

// The memory-neutral error findings of CheckJob(job): they do not block the estimate, and an
// estimate of the job says so.
std::vector<Finding> MemoryNeutralErrors(const Job& job);

// True when the GPU catalog name is a Blackwell part (b100/b200/b300, gb200/gb300, ...).
// Unknown or empty names are not Blackwell.
bool IsBlackwellGpu(std::string_view gpu);

}  // namespace memtune::model
