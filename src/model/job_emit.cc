// FormatJobYaml / FormatJobJson: the field tables (job_schema*.cc) written back out.
#include "memtune/model/job_emit.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include "model/job_parse_internal.h"

namespace memtune::model {
namespace {

using internal::FieldSpec;
using internal::Json;
using internal::SectionSpec;

constexpr std::size_t kCommentColumn = 46;  // characters: where "# default" starts

Json SectionJson(const SectionSpec& spec, const Job& job) {
  Json out = Json::object();
  for (const FieldSpec& f : spec.fields) {
    if (f.subsection) {
      if (job.memtune.framework == Framework::kFsdp2) out[f.name] = SectionJson(*f.subsection, job);
    } else if (f.write) {
      out[f.name] = f.write(job);
    }
  }
  return out;
}

// mixed_precision: the preset name when one applied as is; null otherwise (the effective
// precision fields are in model, optimizer and ddp).
Json MixedPrecisionJson(const Job& job) {
  if (job.mixed_precision.empty() || job.mixed_precision == "custom") return nullptr;
  return job.mixed_precision;
}

Json JobJson(const Job& job) {
  Json out = Json::object();
  out["model"] = SectionJson(internal::ModelTable(), job);
  out["train"] = SectionJson(internal::TrainTable(), job);
  out["optimizer"] = SectionJson(internal::OptimizerTable(), job);
  out["ddp"] = SectionJson(internal::DdpTable(), job);
  out["mixed_precision"] = MixedPrecisionJson(job);
  out["peft"] = job.peft ? SectionJson(internal::PeftTable(), job) : Json(nullptr);
  out["dataset"] = SectionJson(internal::DatasetTable(), job);
  out["memtune"] = SectionJson(internal::MemtuneTable(), job);
  return out;
}

// True when `text` can be written as a plain YAML scalar that reads back as the same string:
// [A-Za-z_][A-Za-z0-9_./+-]* and not a YAML 1.1 boolean/null word (any case). Hand-written
// rather than std::regex: GCC 12's <regex> trips -Wmaybe-uninitialized under -O2 + ASan.
bool IsPlainYaml(const std::string& text) {
  const auto is_start = [](unsigned char c) { return std::isalpha(c) != 0 || c == '_'; };
  const auto is_rest = [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '_' || c == '.' || c == '/' || c == '+' || c == '-';
  };
  if (text.empty() || !is_start(static_cast<unsigned char>(text[0]))) return false;
  const auto rest = [&](char c) { return is_rest(static_cast<unsigned char>(c)); };
  if (!std::all_of(text.begin(), text.end(), rest)) return false;
  std::string lower = text;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static constexpr std::array<std::string_view, 10> kReserved = {"true", "false", "yes", "no", "on",
                                                                 "off",  "null",  "y",   "n",  "~"};
  return std::find(kReserved.begin(), kReserved.end(), lower) == kReserved.end();
}

std::string YamlScalar(const Json& value) {
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    return IsPlainYaml(text) ? text
                             : value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  if (value.is_array()) {
    std::string text = "[";
    for (std::size_t i = 0; i < value.size(); ++i) text += (i ? ", " : "") + YamlScalar(value[i]);
    return text + "]";
  }
  if (value.is_object() && value.empty()) return "{}";
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string DefaultComment(const JobDocument& doc, const std::string& path) {
  const auto it = doc.defaulted_fields.find(path);
  if (it == doc.defaulted_fields.end()) return "";
  return it->second.empty() ? "# default" : "# default: " + it->second;
}

void WriteLine(std::string& out, std::string line, const std::string& comment) {
  if (!comment.empty()) {
    line.resize(std::max(line.size() + 2, kCommentColumn), ' ');
    line += comment;
  }
  out += line + "\n";
}

void WriteMapping(std::string& out, const Json& map, const std::string& path, int indent,
                  const JobDocument& doc) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  for (const auto& [key, value] : map.items()) {
    const std::string child = path + "." + key;
    if (value.is_object() && !value.empty()) {
      WriteLine(out, pad + key + ":", DefaultComment(doc, child));
      WriteMapping(out, value, child, indent + 2, doc);
    } else {
      WriteLine(out, pad + key + ": " + YamlScalar(value), DefaultComment(doc, child));
    }
  }
}

}  // namespace

std::string FormatJobYaml(const JobDocument& doc) {
  std::string out =
      "# The effective job: Megatron-Bridge's rules applied, every absent field at its\n"
      "# Megatron-Core/Bridge default (marked \"# default\").\n";
  const Json job = JobJson(doc.job);
  for (const auto& [section, value] : job.items()) {
    if (value.is_object()) {
      out += section + ":\n";
      WriteMapping(out, value, section, 2, doc);
      continue;
    }
    std::string comment = DefaultComment(doc, section);
    if (section == "mixed_precision" && doc.job.mixed_precision == "custom") {
      comment = "# custom mapping: see the precision fields above";
    }
    if (section == "peft" && value.is_null()) comment = "# full training";
    WriteLine(out, section + ": " + YamlScalar(value), comment);
  }
  return out;
}

std::string FormatJobJson(const JobDocument& doc) {
  Json out = Json::object();
  out["schema"] = "memtune.job/1";
  out["job"] = JobJson(doc.job);
  out["defaults_used"] = doc.defaults_used;
  out["defaulted_fields"] = doc.defaulted_fields;
  out["warnings"] = doc.warnings;
  out["ignored_fields"] = doc.ignored_fields;
  return out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace memtune::model
