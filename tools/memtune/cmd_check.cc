// memtune check: validates a job against the Megatron-Core / Megatron-LM / Megatron-Bridge
// rules on memory and parallelism and the memory-tuning playbook's constraints
// (model/checks.h; the rule table is docs/checks.md).
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "command.h"
#include "commands.h"
#include "job_options.h"
#include "memtune/model/checks.h"

namespace memtune::cli {
namespace {

using nlohmann::ordered_json;

const char* ScopeName(model::RuleScope scope) {
  switch (scope) {
    case model::RuleScope::kAll:
      return "all";
    case model::RuleScope::kMegatron:
      return "megatron";
    case model::RuleScope::kFsdp2:
      return "fsdp2";
  }
  return "all";
}

std::string Count(int n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

// Rules that apply to a job of `framework` (CheckJob skips the others).
int ApplicableRules(model::Framework framework) {
  int n = 0;
  for (const model::RuleInfo& r : model::ListRules()) {
    if (r.scope == model::RuleScope::kAll ||
        (r.scope == model::RuleScope::kMegatron) == (framework == model::Framework::kMegatron)) {
      ++n;
    }
  }
  return n;
}

void PrintFindingsText(const std::vector<model::Finding>& findings, int rules, std::ostream& out) {
  for (const model::Finding& f : findings) {
    out << model::SeverityName(f.severity) << "[" << f.rule_id << "]: " << f.message << "\n";
    for (const auto& [path, value] : f.fields) out << "  " << path << " = " << value << "\n";
    out << "  fix: " << f.fix << "\n";
    out << "  source: " << f.source << "\n\n";
  }
  const int errors = model::CountErrors(findings);
  const int warnings = static_cast<int>(findings.size()) - errors;
  out << Count(errors, "error") << ", " << Count(warnings, "warning") << " (" << rules
      << " rules checked)\n";
}

void PrintFindingsJson(const std::vector<model::Finding>& findings, std::ostream& out) {
  ordered_json list = ordered_json::array();
  for (const model::Finding& f : findings) {
    ordered_json fields = ordered_json::object();
    for (const auto& [path, value] : f.fields) fields[path] = value;
    list.push_back({{"rule_id", f.rule_id},
                    {"severity", model::SeverityName(f.severity)},
                    {"fields", fields},
                    {"message", f.message},
                    {"fix", f.fix},
                    {"source", f.source}});
  }
  const int errors = model::CountErrors(findings);
  ordered_json doc = {{"schema", "memtune.check/1"},
                      {"findings", list},
                      {"errors", errors},
                      {"warnings", static_cast<int>(findings.size()) - errors}};
  out << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void PrintRulesText(std::ostream& out) {
  for (const model::RuleInfo& r : model::ListRules()) {
    std::string id(r.id);
    id.resize(std::max<std::size_t>(id.size() + 1, 42), ' ');
    std::string severity = model::SeverityName(r.severity);
    severity.resize(8, ' ');
    std::string scope = ScopeName(r.scope);
    scope.resize(9, ' ');
    out << id << severity << scope << r.what << "\n";
  }
  out << model::ListRules().size()
      << " rules; --format json adds the fix and upstream source "
         "of each\n";
}

void PrintRulesJson(std::ostream& out) {
  ordered_json rules = ordered_json::array();
  for (const model::RuleInfo& r : model::ListRules()) {
    rules.push_back({{"id", std::string(r.id)},
                     {"severity", model::SeverityName(r.severity)},
                     {"applies_to", ScopeName(r.scope)},
                     {"what", std::string(r.what)},
                     {"fix", std::string(r.fix)},
                     {"source", std::string(r.source)}});
  }
  ordered_json doc = {{"schema", "memtune.check-rules/1"}, {"rules", rules}};
  out << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace

int RunCheck(int argc, char** argv) {
  CLI::App app(
      "Check a training job against the Megatron-Core, Megatron-LM and Megatron-Bridge rules on "
      "memory and parallelism (and the memory-tuning playbook's constraints). Reports every "
      "violation at once; exit code 1 when any is an error, 0 when there are only warnings.",
      "memtune check");
  app.footer(
      "Example:\n  memtune check --example llama3-70b-32xh100\n  memtune check job.yaml "
      "--format json\n  memtune check --list-rules");
  JobFlags job_flags;
  AddJobOptions(app, job_flags);
  OutputFormat format = OutputFormat::kText;
  AddFormatOption(app, format);
  bool list_rules = false;
  app.add_flag("--list-rules", list_rules, "Print the rule table (no job needed)");
  if (int code = ParseArgs(app, argc, argv); code >= 0) return code;

  if (list_rules) {
    format == OutputFormat::kJson ? PrintRulesJson(std::cout) : PrintRulesText(std::cout);
    return kExitOk;
  }
  auto doc = LoadJob(job_flags);
  if (!doc) return PrintError("check", doc.error());
  PrintJobNotes("check", *doc, job_flags.verbose);
  const std::vector<model::Finding> findings = model::CheckJob(doc->job);
  format == OutputFormat::kJson
      ? PrintFindingsJson(findings, std::cout)
      : PrintFindingsText(findings, ApplicableRules(doc->job.memtune.framework), std::cout);
  return model::CountErrors(findings) > 0 ? kExitFindings : kExitOk;
}

}  // namespace memtune::cli
