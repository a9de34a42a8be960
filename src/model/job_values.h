// Strict conversion of one YAML node of a job document into a typed value, with the
// error texts of docs/job.md ("<path> = <value> is not an integer; allowed: ...").
// Private to src/model.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/core/result.h"
#include "memtune/model/job.h"

namespace memtune::model::internal {

// The value of `node` as it appears in an error message: 0, 'abc', [1, 2], {a: 1}, null.
std::string ValueText(const YAML::Node& node);

// Scalar text of a plain or quoted scalar; "" for anything else.
std::string ScalarText(const YAML::Node& node);

// True for a quoted scalar ("8192" or '8192'), which is a string, never a number.
bool IsQuoted(const YAML::Node& node);

// kInvalidConfig "<path> = <value_text> is out of range", hint "allowed: <lo> to <hi>".
Error OutOfRange(const std::string& path, const std::string& value_text, std::int64_t lo,
                 std::int64_t hi);

// An integer in [lo, hi]. Errors: kInvalidInput "<path> = <v> is not an integer",
// kInvalidConfig "<path> = <v> is out of range"; the hint gives the range.
Result<std::int64_t> ToInt(const YAML::Node& node, const std::string& path, std::int64_t lo,
                           std::int64_t hi);

// true/false (YAML 1.1 yes/no/on/off too). Error: "<path> = <v> is not a boolean".
Result<bool> ToBool(const YAML::Node& node, const std::string& path);

// A number in [lo, hi]. Errors: "is not a number", "is out of range".
Result<double> ToDouble(const YAML::Node& node, const std::string& path, double lo, double hi);

// A name: a scalar, or one of the mappings Bridge's cfg.to_yaml() writes for Python
// objects: {_target_: torch.nn.functional.silu, _call_: false} (functions and dtypes: the
// whole dotted target is returned) or {_target_: ..., _name_: MLP, _args_: [...]} (enums:
// the _name_). Error: "<path> = <v> is not a string".
Result<std::string> ToName(const YAML::Node& node, const std::string& path);

// One of `allowed` (exact match after ToName; `aliases` maps other spellings to an
// allowed value). Error: "<path> = '<v>' is not a known value; did you mean 'X'? allowed: ...".
struct EnumAlias {
  std::string spelling;
  std::string value;
};
Result<std::string> ToEnum(const YAML::Node& node, const std::string& path,
                           const std::vector<std::string>& allowed,
                           const std::vector<EnumAlias>& aliases = {});

// A dtype: fp32 | bf16 | fp16 | fp8 | fp4, also torch.float32/torch.bfloat16/torch.float16/
// torch.half/torch.float/torch.uint8 (fp8) and the {_target_: torch.bfloat16} mapping that
// Bridge dumps. Only dtypes in `allowed` are accepted.
Result<Dtype> ToDtype(const YAML::Node& node, const std::string& path,
                      const std::vector<Dtype>& allowed);

// A sequence of names. With a non-empty `allowed`, each element must be one of it.
Result<std::vector<std::string>> ToNameList(const YAML::Node& node, const std::string& path,
                                            const std::vector<std::string>& allowed = {});

// The error for a value of the wrong shape: "<path> = <v> is not <what>"; hint "allowed:
// <allowed>".
Error WrongType(const YAML::Node& node, const std::string& path, std::string_view what,
                std::string_view allowed);

// The hint for an unknown name: "did you mean 'X'? allowed: a, b" (or "allowed: a, b").
std::string AllowedHint(std::string_view name, const std::vector<std::string>& allowed);

}  // namespace memtune::model::internal
