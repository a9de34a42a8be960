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

// Megatron-Core enums whose members Bridge's YAML writer dumps by value
// (megatron/bridge/utils/yaml_utils.py _enum_representer: {_target_: <module>.<Enum>,
// _call_: true, _args_: [value]}), with the member names of
// megatron/core/transformer/enums.py. String-valued enums (Fp8Recipe, ...) need no table:
// their value is the name.
struct EnumMembers {
  const char* enum_class;  // the last component of _target_
  std::vector<std::pair<std::int64_t, const char*>> members;
};

const std::vector<EnumMembers>& McoreEnums() {
  static const std::vector<EnumMembers> kEnums = {
      {"AttnBackend", {{1, "flash"}, {2, "fused"}, {3, "unfused"}, {4, "local"}, {5, "auto"}}},
      // The pre-CudaGraphModule enum, kept by MCore for old checkpoints.
      {"CudaGraphScope",
       {{1, "full_iteration"},
        {2, "attn"},
        {3, "mlp"},
        {4, "moe"},
        {5, "moe_router"},
        {6, "moe_preprocess"},
        {7, "mamba"},
        {8, "full_iteration_inference"}}},
      {"CudaGraphModule",
       {{1, "attn"},
        {2, "mlp"},
        {3, "moe"},
        {4, "moe_router"},
        {5, "moe_preprocess"},
        {6, "mamba"}}},
  };
  return kEnums;
}

// The enum member an instantiation-form mapping names: its `_args_` value, read through
// the member table for integer values. "" when the mapping is not an enum call.
Result<std::string> EnumMember(const YAML::Node& node, const std::string& path) {
  const YAML::Node target = node["_target_"];
  const YAML::Node args = node["_args_"];
  const YAML::Node call = node["_call_"];
  if (!target || !target.IsScalar() || !args || !args.IsSequence() || args.size() != 1 ||
      !args[0].IsScalar() || (call && call.IsScalar() && call.Scalar() == "false")) {
    return std::string();
  }
  const std::string value = args[0].Scalar();
  std::int64_t number = 0;
  try {
    number = args[0].as<std::int64_t>();
  } catch (const YAML::Exception&) {
    return value;  // a string-valued enum: the value is the name
  }
  const std::string& cls = target.Scalar();
  const std::string short_name =
      cls.substr(cls.rfind('.') == std::string::npos ? 0 : cls.rfind('.') + 1);
  for (const EnumMembers& e : McoreEnums()) {
    if (short_name != e.enum_class) continue;
    std::string allowed;
    for (const auto& [v, name] : e.members) {
      if (v == number) return std::string(name);
      allowed += (allowed.empty() ? "" : ", ") + std::string(name) + " = " + std::to_string(v);
    }
    return InvalidInput(path,
                        path + " = " + cls + "(" + value + ") is not a member of " + e.enum_class,
                        "allowed: " + allowed);
  }
  return InvalidInput(
      path, path + " = " + cls + "(" + value + ") is an enum memtune cannot read",
      "write the member's name instead, e.g. " + path.substr(path.rfind('.') + 1) + ": <name>");
}

// A mapping in Bridge's instantiation form: an enum call ({_target_: Enum, _call_: true,
// _args_: [v]}: the member), a member name (_name_), or a function / dtype / class
// ({_target_: torch.bfloat16, _call_: false}: the target). "" otherwise.
Result<std::string> ObjectName(const YAML::Node& node, const std::string& path) {
  if (const YAML::Node name = node["_name_"]; name && name.IsScalar()) return name.Scalar();
  MEMTUNE_TRY(std::string member, EnumMember(node, path));
  if (!member.empty()) return member;
  if (const YAML::Node target = node["_target_"]; target && target.IsScalar()) {
    return target.Scalar();
  }
  return std::string();
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
    MEMTUNE_TRY(std::string name, ObjectName(node, path));
    if (!name.empty()) return name;
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
