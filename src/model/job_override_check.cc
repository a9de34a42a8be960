// RefuseUnknownOverrides: the near-name search over the section tables.
#include "model/job_override_check.h"

#include <algorithm>
#include <map>
#include <string>

#include "memtune/core/suggest.h"
#include "memtune/model/ignored_fields.h"
#include "model/job_schema.h"

namespace memtune::model::internal {
namespace {

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t at = text.find(sep, start);
    const std::size_t end = at == std::string::npos ? text.size() : at;
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// The fields a section reads, or the section names for a top-level path.
std::vector<std::string> SectionFieldNames(const std::string& section) {
  static const std::map<std::string, const SectionSpec& (*)()> kTables = {
      {"model", ModelTable}, {"train", TrainTable},     {"optimizer", OptimizerTable},
      {"ddp", DdpTable},     {"dataset", DatasetTable}, {"memtune", MemtuneTable},
      {"peft", PeftTable}};
  std::vector<std::string> names;
  if (auto it = kTables.find(section); it != kTables.end()) {
    for (const FieldSpec& f : it->second().fields) names.push_back(f.name);
  } else {
    for (const auto& entry : kTables) names.push_back(entry.first);
  }
  return names;
}

std::string NearField(const std::string& key, const std::vector<std::string>& names) {
  if (std::string near = Suggest(key, names); !near.empty()) return near;
  const std::vector<std::string> words = Split(key, '_');
  for (const std::string& name : names) {
    const std::vector<std::string> have = Split(name, '_');
    std::string initials;
    for (const std::string& w : have) initials += w.substr(0, 1);
    const bool covers = std::all_of(words.begin(), words.end(), [&](const std::string& w) {
      return std::find(have.begin(), have.end(), w) != have.end();
    });
    if ((covers && words.size() > 1) || initials == key) return name;
  }
  return "";
}

}  // namespace

Status RefuseUnknownOverrides(const std::vector<JobOverride>& overrides, const JobDocument& doc) {
  for (const JobOverride& o : overrides) {
    for (const std::string& ignored : doc.ignored_fields) {
      const bool covers = o.path == ignored || o.path.rfind(ignored + ".", 0) == 0;
      if (!covers || FindIgnoredInput(ignored) != nullptr) continue;
      const std::vector<std::string> parts = Split(ignored, '.');
      const std::string section = parts.size() > 1 ? parts.front() : "";
      const std::string near = NearField(parts.back(), SectionFieldNames(section));
      return InvalidConfig(
          o.path, o.path + " (" + o.origin + ") is not a field memtune or upstream defines",
          near.empty() ? "allowed: the fields of docs/job-format.md"
                       : "did you mean '" + (section.empty() ? "" : section + ".") + near + "'?");
    }
  }
  return OkStatus();
}

}  // namespace memtune::model::internal
