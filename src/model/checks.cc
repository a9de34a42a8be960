// CheckJob: runs the rule tables of checks_*.cc; shared formatting helpers.
#include "memtune/model/checks.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "model/checks_internal.h"

namespace memtune::model {
namespace {

using checks::Rule;

// Every area's table, in run order.
std::span<const Rule> (*const kAreas[])() = {
    checks::LayoutRules,    checks::HeadsRules,     checks::AttentionRules, checks::PipelineRules,
    checks::MoeRules,       checks::RecomputeRules, checks::OffloadRules,   checks::PrecisionRules,
    checks::CudaGraphRules, checks::PeftRules,      checks::FsdpRules,
};

bool Applies(RuleScope scope, Framework framework) {
  switch (scope) {
    case RuleScope::kAll:
      return true;
    case RuleScope::kMegatron:
      return framework == Framework::kMegatron;
    case RuleScope::kFsdp2:
      return framework == Framework::kFsdp2;
  }
  return true;
}

}  // namespace

const char* SeverityName(Severity severity) {
  return severity == Severity::kError ? "error" : "warning";
}

std::vector<Finding> CheckJob(const Job& job) {
  std::vector<Finding> findings;
  for (auto area : kAreas) {
    for (const Rule& rule : area()) {
      if (!Applies(rule.info.scope, job.memtune.framework)) continue;
      for (checks::Violation& v : rule.check(job)) {
        findings.push_back(Finding{std::string(rule.info.id), rule.info.severity,
                                   std::move(v.fields), std::move(v.message), std::move(v.fix),
                                   std::string(rule.info.source)});
      }
    }
  }
  return findings;
}

std::span<const RuleInfo> ListRules() {
  static const std::vector<RuleInfo> kRules = [] {
    std::vector<RuleInfo> rules;
    for (auto area : kAreas) {
      for (const Rule& rule : area()) rules.push_back(rule.info);
    }
    return rules;
  }();
  return kRules;
}

int CountErrors(const std::vector<Finding>& findings) {
  return static_cast<int>(std::count_if(findings.begin(), findings.end(), [](const Finding& f) {
    return f.severity == Severity::kError;
  }));
}

bool BlocksEstimate(std::string_view rule_id) {
  for (const RuleInfo& rule : ListRules()) {
    if (rule.id == rule_id) return rule.severity == Severity::kError && !rule.memory_neutral;
  }
  return false;
}

// The error rules with the given memory_neutral flag, in table order. The rule tables are
// static arrays, so the pointers stay valid; selecting them once keeps the scan off the
// estimator's hot path (every EstimateMemory call runs the blocking rules).
std::vector<const Rule*> ErrorRules(bool memory_neutral) {
  std::vector<const Rule*> rules;
  for (auto area : kAreas) {
    for (const Rule& rule : area()) {
      if (rule.info.severity == Severity::kError && rule.info.memory_neutral == memory_neutral)
        rules.push_back(&rule);
    }
  }
  return rules;
}

std::vector<Finding> RunRules(const std::vector<const Rule*>& rules, const Job& job) {
  std::vector<Finding> errors;
  for (const Rule* rule : rules) {
    if (!Applies(rule->info.scope, job.memtune.framework)) continue;
    for (checks::Violation& v : rule->check(job)) {
      errors.push_back(Finding{std::string(rule->info.id), rule->info.severity, std::move(v.fields),
                               std::move(v.message), std::move(v.fix),
                               std::string(rule->info.source)});
    }
  }
  return errors;
}

std::vector<Finding> StructuralErrors(const Job& job) {
  static const std::vector<const Rule*> kBlocking = ErrorRules(false);
  return RunRules(kBlocking, job);
}

std::vector<Finding> MemoryNeutralErrors(const Job& job) {
  static const std::vector<const Rule*> kNeutral = ErrorRules(true);
  return RunRules(kNeutral, job);
}

bool IsBlackwellGpu(std::string_view gpu) {
  std::string name;
  for (char c : gpu) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto digit_at = [&](std::size_t i) {
    return i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]));
  };
  // NVIDIA's Blackwell data-center parts: B100, B200, B300 and the Grace-Blackwell GB200,
  // GB300 superchips.
  return (name.rfind("b", 0) == 0 && digit_at(1)) || (name.rfind("gb", 0) == 0 && digit_at(2));
}

namespace checks {

std::string Str(std::int64_t value) { return std::to_string(value); }

std::string Dec(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", value);
  return buf;
}

std::string Bool(bool value) { return value ? "true" : "false"; }

std::string Opt(const std::optional<int>& value) { return value ? std::to_string(*value) : "null"; }

std::string Opt(const std::optional<std::int64_t>& value) {
  return value ? std::to_string(*value) : "null";
}

std::string List(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out + "]";
}

std::string Quoted(std::string_view text) {
  std::string out = "\"";  // appended, not inserted at the front (GCC 12 -Wrestrict, bug 105329)
  out += text;
  out += '"';
  return out;
}

Violation One(std::string path, std::string value, std::string message, std::string fix) {
  return Violation{{{std::move(path), std::move(value)}}, std::move(message), std::move(fix)};
}

std::int64_t EffectiveWorldSize(const Job& job) {
  if (job.memtune.world_size > 0) return job.memtune.world_size;
  const auto& m = job.model;
  return static_cast<std::int64_t>(m.tensor_model_parallel_size) * m.pipeline_model_parallel_size *
         m.context_parallel_size;
}

bool SizesValid(const Job& job) {
  const auto& m = job.model;
  return m.tensor_model_parallel_size >= 1 && m.pipeline_model_parallel_size >= 1 &&
         m.context_parallel_size >= 1 && m.expert_model_parallel_size >= 1 &&
         m.expert_tensor_parallel_size.value_or(1) >= 1 &&
         m.virtual_pipeline_model_parallel_size.value_or(1) >= 1 && m.num_layers >= 1 &&
         job.train.micro_batch_size >= 1 && job.train.global_batch_size >= 1 &&
         job.memtune.world_size >= 0;
}

bool Contains(const std::vector<std::string>& items, std::string_view name) {
  return std::find(items.begin(), items.end(), name) != items.end();
}

int EffectiveVpp(const Job& job) {
  return job.model.virtual_pipeline_model_parallel_size.value_or(1);
}

std::string Divisors(std::int64_t n, std::int64_t lo, std::int64_t hi) {
  std::string out;
  for (std::int64_t d = std::max<std::int64_t>(lo, 1); d <= hi && d <= n; ++d) {
    if (n % d == 0) out += (out.empty() ? "" : ", ") + std::to_string(d);
  }
  return out;
}

}  // namespace checks
}  // namespace memtune::model
