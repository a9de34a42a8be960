// Private to the check rules (src/model/checks_*.cc): the rule-table row type, the per-area
// tables, and small formatting helpers shared by the predicates.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memtune/model/checks.h"
#include "memtune/model/job.h"

namespace memtune::model::checks {

using Fields = std::vector<std::pair<std::string, std::string>>;

// One violation reported by a rule's predicate; CheckJob adds id, severity and source.
struct Violation {
  Fields fields;
  std::string message;
  std::string fix;
};
using Violations = std::vector<Violation>;

// A rule: its description and its predicate (returns one entry per violation, empty when
// the job satisfies the rule).
// RuleInfo::memory_neutral for the error rows whose violation leaves the memory figure as it
// is (an environment variable, a launch-time switch), so estimate runs and reports it.
inline constexpr bool kMemoryNeutral = true;

struct Rule {
  RuleInfo info;
  Violations (*check)(const Job& job);
};

// The per-area tables, in the order CheckJob runs them.
std::span<const Rule> LayoutRules();     // checks_layout.cc
std::span<const Rule> HeadsRules();      // checks_heads.cc
std::span<const Rule> AttentionRules();  // checks_attention.cc
std::span<const Rule> PipelineRules();   // checks_pipeline.cc
std::span<const Rule> MoeRules();        // checks_moe.cc
std::span<const Rule> RecomputeRules();  // checks_recompute.cc
std::span<const Rule> OffloadRules();    // checks_offload.cc
std::span<const Rule> PrecisionRules();  // checks_precision.cc
std::span<const Rule> CudaGraphRules();  // checks_cudagraph.cc
std::span<const Rule> PeftRules();       // checks_peft.cc
std::span<const Rule> FsdpRules();       // checks_fsdp.cc

// Source strings (RuleInfo::source).
inline constexpr std::string_view kMcoreParallel = "MCore ModelParallelConfig.__post_init__";
inline constexpr std::string_view kMcoreTransformer = "MCore TransformerConfig.__post_init__";
inline constexpr std::string_view kMlmArgs = "Megatron-LM arguments.py";
inline constexpr std::string_view kBridge = "Bridge ConfigContainer.validate";
inline constexpr std::string_view kPlaybook = "memory-tuning playbook";

// Formatting of values as the job document writes them.
std::string Str(std::int64_t value);
inline std::string Str(int value) { return Str(static_cast<std::int64_t>(value)); }
std::string Dec(double value);  // shortest form: 0.1, 1, 0.25
std::string Bool(bool value);
std::string Opt(const std::optional<int>& value);  // "null" when empty
std::string Opt(const std::optional<std::int64_t>& value);
std::string List(const std::vector<std::string>& items);  // "[a, b]"
std::string Quoted(std::string_view text);                // "\"text\"" ("\"\"" when empty)

// A violation with one field (path, value).
Violation One(std::string path, std::string value, std::string message, std::string fix);

// World size with the job format's default applied: memtune.world_size, or TP*PP*CP when 0.
std::int64_t EffectiveWorldSize(const Job& job);

// True when every parallel size, batch size and layer count is >= 1 (the rules that divide
// by them skip the job otherwise; layout.positive-sizes reports the bad field).
bool SizesValid(const Job& job);

// True when `items` contains `name`.
bool Contains(const std::vector<std::string>& items, std::string_view name);

// The effective virtual pipeline size: VPP when set, else 1 (the layout string's VPP is
// checked separately by pipeline.layout-*).
int EffectiveVpp(const Job& job);

// Divisors of n in [lo, hi], as "1, 2, 4" (for fix texts).
std::string Divisors(std::int64_t n, std::int64_t lo, std::int64_t hi);

}  // namespace memtune::model::checks
