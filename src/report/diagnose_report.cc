// Text and JSON renderers of a Diagnosis.
#include "memtune/report/diagnose_report.h"

#include <nlohmann/json.hpp>
#include <set>

#include "memtune/alloc/oom_message.h"

namespace memtune::report {
namespace {

using alloc::FormatSize;
using json = nlohmann::json;

std::string Where(const diagnose::Evidence& e) {
  std::string where = e.source;  // appended: GCC 12's -Wrestrict misfires on "x" + string
  if (e.line > 0) {
    where += ':';
    where += std::to_string(e.line);
  }
  return where;
}

std::string EvidenceLine(const diagnose::Evidence& e) {
  std::string value = e.value_bytes ? FormatSize(*e.value_bytes) : e.value;
  if (e.value_bytes && !e.value.empty()) value += " (" + e.value + ")";
  return "  " + e.what + ": " + value + "  [" + Where(e) + (e.line > 0 ? "" : ", " + e.text) +
         "]\n";
}

// Each line the evidence came from, once, in order of first use.
std::string SourceLines(const std::vector<diagnose::Evidence>& evidence) {
  std::string out;
  std::set<std::string> seen;
  for (const auto& e : evidence) {
    if (e.line <= 0 || !seen.insert(Where(e)).second) continue;
    out += "  " + Where(e) + ": " + e.text + "\n";
  }
  return out.empty() ? out : "from:\n" + out;
}

std::string FixLine(std::size_t index, const diagnose::Fix& f) {
  std::string out = "  " + std::to_string(index + 1) + ". " + f.text + " (cost: " + f.cost + ")\n";
  if (!f.predicted.empty()) out += "     " + f.predicted + "\n";
  if (f.effect_bytes) {
    out += "     predicted margin change: " + std::string(*f.effect_bytes >= 0 ? "+" : "-") +
           FormatSize(*f.effect_bytes >= 0 ? *f.effect_bytes : -*f.effect_bytes) + "\n";
  }
  return out;
}

std::string ComparisonText(const diagnose::JobComparison& c) {
  std::string out = "compared with the job:\n";
  out += "  predicted allocated " + FormatSize(c.predicted_allocated_bytes) + " (model state " +
         FormatSize(c.predicted_model_state_bytes) + ", activations " +
         FormatSize(c.predicted_activation_bytes) + ")";
  if (c.predicted_reserved_bytes) out += ", reserved " + FormatSize(*c.predicted_reserved_bytes);
  out += "\n";
  if (c.observed_allocated_bytes) {
    out += "  observed allocated " + FormatSize(*c.observed_allocated_bytes);
    if (c.observed_reserved_bytes) out += ", reserved " + FormatSize(*c.observed_reserved_bytes);
    out += "\n";
  }
  out += "  " + c.attribution + "\n";
  for (const auto& v : c.verdicts) out += "  verdict " + v + "\n";
  return out;
}

json OptionalBytes(const std::optional<std::int64_t>& v) { return v ? json(*v) : json(nullptr); }

json EvidenceJson(const diagnose::Evidence& e) {
  json j = {{"what", e.what}, {"source", e.source}, {"line", e.line}, {"text", e.text}};
  if (e.value_bytes) j["value_bytes"] = *e.value_bytes;
  if (!e.value.empty()) j["value"] = e.value;
  return j;
}

json FixJson(const diagnose::Fix& f) {
  json j = {{"id", f.id}, {"text", f.text}, {"cost", f.cost}};
  if (!f.predicted.empty()) j["predicted"] = f.predicted;
  if (f.effect_bytes) j["effect_bytes"] = *f.effect_bytes;
  return j;
}

json ComparisonJson(const diagnose::JobComparison& c) {
  return {{"predicted_allocated_bytes", c.predicted_allocated_bytes},
          {"predicted_reserved_bytes", OptionalBytes(c.predicted_reserved_bytes)},
          {"predicted_model_state_bytes", c.predicted_model_state_bytes},
          {"predicted_activation_bytes", c.predicted_activation_bytes},
          {"observed_allocated_bytes", OptionalBytes(c.observed_allocated_bytes)},
          {"observed_reserved_bytes", OptionalBytes(c.observed_reserved_bytes)},
          {"attribution", c.attribution},
          {"verdicts", c.verdicts}};
}

}  // namespace

std::string RenderDiagnoseText(const diagnose::Diagnosis& d) {
  std::string out = std::string("cause: ") + model::NameOf(d.cause) + " (confidence " +
                    model::NameOf(d.confidence) + ")\n";
  if (!d.evidence.empty()) out += "evidence:\n";
  for (const auto& e : d.evidence) out += EvidenceLine(e);
  out += SourceLines(d.evidence);
  if (!d.notes.empty()) out += "notes:\n";
  for (const auto& n : d.notes) out += "  " + n + "\n";
  if (!d.fixes.empty()) out += "fixes, in the playbook's order:\n";
  for (std::size_t i = 0; i < d.fixes.size(); ++i) out += FixLine(i, d.fixes[i]);
  if (d.comparison) out += ComparisonText(*d.comparison);
  return out;
}

std::string RenderDiagnoseJson(const diagnose::Diagnosis& d) {
  json doc = {{"schema", "memtune.diagnose/1"},
              {"cause", model::NameOf(d.cause)},
              {"confidence", model::NameOf(d.confidence)}};
  doc["evidence"] = json::array();
  for (const auto& e : d.evidence) doc["evidence"].push_back(EvidenceJson(e));
  doc["fixes"] = json::array();
  for (const auto& f : d.fixes) doc["fixes"].push_back(FixJson(f));
  doc["notes"] = d.notes;
  if (d.comparison) doc["comparison"] = ComparisonJson(*d.comparison);
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace memtune::report
