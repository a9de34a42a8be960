// Private pieces of lint: the rule ids, where a finding points, and what every rule group
// reads (one Context per file).
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/lint/lint.h"
#include "memtune/model/job_parse.h"
#include "memtune/model/launch_script.h"

namespace memtune::lint {

inline constexpr std::string_view kRuleAfterCommand = "env.after-command";
inline constexpr std::string_view kRuleNotExported = "env.not-exported";
inline constexpr std::string_view kRuleBoolCase = "alloc-conf.bool-case";
inline constexpr std::string_view kRuleEquals = "alloc-conf.equals";
inline constexpr std::string_view kRuleUnknownOption = "alloc-conf.unknown-option";
inline constexpr std::string_view kRuleInvalid = "alloc-conf.invalid";
inline constexpr std::string_view kRuleMaxSplitExpandable = "alloc-conf.max-split-expandable";
inline constexpr std::string_view kRulePytorchWarning = "alloc-conf.pytorch-warning";
inline constexpr std::string_view kRuleBothDiffer = "alloc-conf.both-vars-differ";
inline constexpr std::string_view kRuleNewNameOnly = "alloc-conf.new-name-only";
inline constexpr std::string_view kRuleWhitespace = "alloc-conf.whitespace";
inline constexpr std::string_view kRuleGuardBypass = "megatron.guard-bypass";
inline constexpr std::string_view kRuleAvoidRecordStreams = "nccl.avoid-record-streams-prefix";
inline constexpr std::string_view kRuleJobNotBuilt = "job.not-built";
inline constexpr std::string_view kRuleOom = "estimate.oom";
inline constexpr std::string_view kRuleAtRisk = "estimate.at-risk";
// `memtune check`'s allocator-config parse rule: lint's alloc-conf.* rules report the same
// parse, with the reason named, so the check finding would repeat them.
inline constexpr std::string_view kSkippedCheckRule = "alloc.conf-valid";

// The check rules as lint rules ("check.<id>"), in check's table order.
std::span<const LintRule> ListCheckLintRules();

// Where a finding points and the text there.
struct Place {
  std::string file;
  int line = 0;
  int column = 0;
  std::string text;
};

// A finding of `rule_id` at `place`, with the rule's severity and source; `fix` "" = the
// rule's generic fix.
Finding MakeFinding(std::string_view rule_id, const Place& place, std::string message,
                    std::string fix = "");

// What the rules of one file read.
struct Context {
  std::string file;
  std::string_view text;
  bool is_script = false;
  model::LaunchScript script;  // a script's; empty for a job document
  // The environment the training process starts with: the script's exports and prefixes
  // at the command (all exports when there is no command), or the job's memtune.env.
  std::map<std::string, std::string> env;
  std::optional<model::JobDocument> job;  // the job, when it could be built
  std::string config_file;                // a script's --config-file YAML, as named
  std::string config_text;                // its text
  const LintOptions* options = nullptr;
  // The release whose allocator rules apply: LintOptions::torch_version, else the job
  // document's memtune.versions.torch, else alloc::kDefaultTorchVersion (set by BuildJob).
  alloc::TorchVersion torch_version = alloc::kDefaultTorchVersion;
  const LintFileReader* read = nullptr;  // reads files the script names (never null)
  std::vector<Finding>* findings = nullptr;
  std::vector<std::string>* notes = nullptr;

  void Add(Finding f) const { findings->push_back(std::move(f)); }
};

// Where variable `name` got the value the training process sees (its last assignment before
// the command; a job document: the line naming it); the file start when unknown.
Place EnvPlace(const Context& c, const std::string& name);

// Where the flag, dotted override or env entry behind job field `path` was written
// ("model.pipeline_model_parallel_size" -> the `--pipeline-model-parallel-size` word);
// nullopt when the file does not name it.
std::optional<Place> FieldPlace(const Context& c, const std::string& path);

// The training command's position (the file start when there is none).
Place CommandPlace(const Context& c);

// Rule groups, each adding its findings to c.findings.
void EnvRules(const Context& c);        // env.*: where variables are set (env_rules.cc)
void AllocConfRules(const Context& c);  // alloc-conf.*, megatron.guard-bypass, nccl.*
void BuildJob(Context& c);              // c.job, or a job.not-built finding (job_rules.cc)
void CheckRules(const Context& c);      // check.<id> for every `memtune check` finding
void EstimateRules(const Context& c);   // estimate.* (LintOptions::estimate)

}  // namespace memtune::lint
