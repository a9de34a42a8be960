// Strict scalar conversion for the job parser, and the texts of its type errors.
#include "model/job_values.h"

#include <algorithm>
#include <cmath>

#include "memtune/core/suggest.h"
#include "memtune/core/units.h"

namespace memtune::model::internal {
namespace {

std::string RangeText(std::int64_t lo, std::int64_t hi) {
  return FormatWithCommas(lo) + " to " + FormatWithCommas(hi);
}

std::string NumberText(double value) {
  std::string text = std::to_string(value);
  text.erase(text.find_last_not_of('0') + 1);
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

// A mapping in Bridge's object form: has _target_ (function, dtype, class) or _name_ (enum).
std::string ObjectName(const YAML::Node& node) {
  if (const YAML::Node name = node["_name_"]; name && name.IsScalar()) return name.Scalar();
  if (const YAML::Node target = node["_target_"]; target && target.IsScalar()) {
    return target.Scalar();
  }
  return "";
}

}  // namespace

std::string ValueText(const YAML::Node& node) {
  if (!node || node.IsNull()) return "null";
  if (node.IsScalar()) {
    return IsQuoted(node) ? "'" + node.Scalar() + "'" : node.Scalar();
  }
  YAML::Emitter out;
  out.SetMapFormat(YAML::Flow);
  out.SetSeqFormat(YAML::Flow);
  out << node;
  return out.c_str();
}

std::string ScalarText(const YAML::Node& node) {
  return node && node.IsScalar() ? node.Scalar() : std::string();
}

bool IsQuoted(const YAML::Node& node) { return node && node.IsScalar() && node.Tag() == "!"; }

Error WrongType(const YAML::Node& node, const std::string& path, std::string_view what,
                std::string_view allowed) {
  return InvalidInput(path, path + " = " + ValueText(node) + " is not " + std::string(what),
                      "allowed: " + std::string(allowed));
}

std::string AllowedHint(std::string_view name, const std::vector<std::string>& allowed) {
  const std::string suggestion = DidYouMean(name, allowed);
  const std::string list = "allowed: " + JoinNames(allowed);
  return suggestion.empty() ? list : suggestion + " " + list;
}

Error OutOfRange(const std::string& path, const std::string& value_text, std::int64_t lo,
                 std::int64_t hi) {
  return InvalidConfig(path, path + " = " + value_text + " is out of range",
                       "allowed: " + RangeText(lo, hi));
}

Result<std::int64_t> ToInt(const YAML::Node& node, const std::string& path, std::int64_t lo,
                           std::int64_t hi) {
  const std::string allowed = "an integer from " + RangeText(lo, hi);
  if (!node.IsScalar() || IsQuoted(node)) return WrongType(node, path, "an integer", allowed);
  std::int64_t value = 0;
  try {
    value = node.as<std::int64_t>();
  } catch (const YAML::Exception&) {
    return WrongType(node, path, "an integer", allowed);
  }
  if (value < lo || value > hi) return OutOfRange(path, node.Scalar(), lo, hi);
  return value;
}

Result<bool> ToBool(const YAML::Node& node, const std::string& path) {
  if (node.IsScalar() && !IsQuoted(node)) {
    try {
      return node.as<bool>();
    } catch (const YAML::Exception&) {
    }
  }
  return WrongType(node, path, "a boolean", "true, false");
}

Result<double> ToDouble(const YAML::Node& node, const std::string& path, double lo, double hi) {
  const std::string range = NumberText(lo) + " to " + NumberText(hi);
  double value = 0;
  bool ok = node.IsScalar() && !IsQuoted(node);
  if (ok) {
    try {
      value = node.as<double>();
    } catch (const YAML::Exception&) {
      ok = false;
    }
  }
  if (!ok || !std::isfinite(value))
    return WrongType(node, path, "a number", "a number from " + range);
  if (value < lo || value > hi) {
    return InvalidConfig(path, path + " = " + node.Scalar() + " is out of range",
                         "allowed: " + range);
  }
  return value;
}

Result<std::string> ToName(const YAML::Node& node, const std::string& path) {
  if (node.IsScalar()) return node.Scalar();
  if (node.IsMap()) {
    if (std::string name = ObjectName(node); !name.empty()) return name;
  }
  return WrongType(node, path, "a string", "a name, or a {_target_: ...} mapping as Bridge writes");
}

Result<std::string> ToEnum(const YAML::Node& node, const std::string& path,
                           const std::vector<std::string>& allowed,
                           const std::vector<EnumAlias>& aliases) {
  MEMTUNE_TRY(const std::string name, ToName(node, path));
  if (std::find(allowed.begin(), allowed.end(), name) != allowed.end()) return name;
  for (const EnumAlias& alias : aliases) {
    if (alias.spelling == name) return alias.value;
  }
  return InvalidConfig(path, path + " = '" + name + "' is not a known value",
                       AllowedHint(name, allowed));
}

Result<Dtype> ToDtype(const YAML::Node& node, const std::string& path,
                      const std::vector<Dtype>& allowed) {
  // torch dtype names as str(torch.dtype) prints them (Bridge's dtype representer).
  static const std::vector<EnumAlias> kTorchNames = {
      {"torch.float32", "fp32"},      {"torch.float", "fp32"}, {"float32", "fp32"},
      {"torch.bfloat16", "bf16"},     {"bfloat16", "bf16"},    {"torch.float16", "fp16"},
      {"torch.half", "fp16"},         {"float16", "fp16"},     {"torch.uint8", "fp8"},
      {"torch.float8_e4m3fn", "fp8"}, {"uint8", "fp8"},
  };
  std::vector<std::string> names;
  for (Dtype dtype : allowed) names.push_back(DtypeName(dtype));
  std::vector<EnumAlias> aliases;
  for (const EnumAlias& alias : kTorchNames) {
    if (std::find(names.begin(), names.end(), alias.value) != names.end()) aliases.push_back(alias);
  }
  MEMTUNE_TRY(const std::string name, ToEnum(node, path, names, aliases));
  for (Dtype dtype : allowed) {
    if (name == DtypeName(dtype)) return dtype;
  }
  return Error{ErrorCode::kInternal, path, "dtype table out of sync for '" + name + "'", ""};
}

Result<std::vector<std::string>> ToNameList(const YAML::Node& node, const std::string& path,
                                            const std::vector<std::string>& allowed) {
  if (!node.IsSequence()) {
    return WrongType(node, path, "a list",
                     allowed.empty() ? "a list of names" : "a list of " + JoinNames(allowed));
  }
  std::vector<std::string> names;
  for (std::size_t i = 0; i < node.size(); ++i) {
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    if (allowed.empty()) {
      MEMTUNE_TRY(std::string name, ToName(node[i], item_path));
      names.push_back(std::move(name));
    } else {
      MEMTUNE_TRY(std::string name, ToEnum(node[i], item_path, allowed));
      names.push_back(std::move(name));
    }
  }
  return names;
}

}  // namespace memtune::model::internal
