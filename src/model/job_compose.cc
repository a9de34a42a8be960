// ComposeJob: document + Megatron-LM arguments + overrides -> one tree -> ParseJobNode.
#include "memtune/model/job_compose.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>

#include "memtune/model/ignored_fields.h"
#include "memtune/model/recipes.h"
#include "model/job_override_check.h"
#include "model/job_values.h"
#include "model/job_yaml.h"
#include "model/megatron_args.h"
#include "model/torchtitan_toml.h"

namespace memtune::model {
namespace {

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t dot = path.find('.', start);
    const std::size_t end = dot == std::string::npos ? path.size() : dot;
    parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// `src` over `dst`: mappings merge key by key, anything else replaces. A key `src` gives
// twice in one mapping is an error, as ParseJobNode makes it in a document that is not
// merged: the merge would keep only the last. `path` is the dotted name of `src`.
Status MergeInto(YAML::Node dst, const YAML::Node& src, const std::string& path = "") {
  std::set<std::string> seen;
  for (const auto& kv : src) {
    const std::string key = kv.first.Scalar();
    const std::string field = path.empty() ? key : path + "." + key;
    if (kv.first.IsScalar() && !seen.insert(key).second) {
      return InvalidInput(field, field + " is given twice");
    }
    YAML::Node existing = dst[key];
    if (existing.IsMap() && kv.second.IsMap()) {
      MEMTUNE_RETURN_IF_ERROR(MergeInto(existing, kv.second, field));
    } else {
      dst[key] = YAML::Clone(kv.second);
    }
  }
  return OkStatus();
}

Status SetPath(YAML::Node root, const JobOverride& o) {
  const std::vector<std::string> parts = SplitPath(o.path);
  for (const std::string& part : parts) {
    if (part.empty()) {
      return InvalidInput(o.origin, o.origin + " " + o.path + ": empty field name in the path",
                          "allowed: a dotted path such as model.tensor_model_parallel_size");
    }
  }
  MEMTUNE_TRY(const YAML::Node value, internal::LoadYamlText(o.value, o.origin + " " + o.path));
  // yaml-cpp: Node::operator= writes through to the referenced node; reset() rebinds.
  YAML::Node node;
  node.reset(root);
  std::string walked;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    walked += (walked.empty() ? "" : ".") + parts[i];
    YAML::Node child = node[parts[i]];
    if (walked == "mixed_precision" && child.IsScalar()) {
      // A preset string with one field changed: the same preset as a mapping (job_parse.h).
      YAML::Node mapping(YAML::NodeType::Map);
      mapping["preset"] = child.Scalar();
      node[parts[i]] = mapping;
      child.reset(mapping);
    } else if (!child.IsDefined() || child.IsNull()) {
      YAML::Node mapping(YAML::NodeType::Map);
      node[parts[i]] = mapping;
      child.reset(mapping);
    } else if (!child.IsMap()) {
      return InvalidInput(o.origin, o.origin + " " + o.path + ": " + walked + " = " +
                                        internal::ValueText(child) + " is not a mapping");
    }
    node.reset(child);
  }
  node[parts.back()] = value;
  return OkStatus();
}

// Adds " (from --tp)" to an error about a field an override set.
Error Attribute(Error error, const std::map<std::string, std::string>& origins) {
  for (const auto& [path, origin] : origins) {
    if (error.field == path || error.field.rfind(path + ".", 0) == 0 ||
        error.field.rfind(path + "[", 0) == 0) {
      error.message += " (from " + origin + ")";
      break;
    }
  }
  return error;
}

// A job naming memtune.recipe (in the document or a --recipe / --set override) is the
// recipe's document with the job's fields merged on top. A `memtune` that is not a
// mapping is left to ParseJobNode, which names its type.
Result<YAML::Node> StartFromRecipe(const YAML::Node& root,
                                   const std::vector<JobOverride>& overrides) {
  if (const YAML::Node memtune = root["memtune"];
      memtune && !memtune.IsNull() && !memtune.IsMap()) {
    return root;
  }
  std::string name;
  std::string origin = "memtune.recipe";
  if (root["memtune"] && root["memtune"].IsMap() && root["memtune"]["recipe"] &&
      root["memtune"]["recipe"].IsScalar()) {
    name = root["memtune"]["recipe"].Scalar();
  }
  for (const JobOverride& o : overrides) {
    if (o.path == "memtune.recipe") {
      name = o.value;
      origin = o.origin;
    }
  }
  if (name.empty()) return root;
  auto text = RecipeJobYaml(name);
  if (!text) {
    Error e = text.error();
    if (origin != "memtune.recipe") e.message += " (from " + origin + ")";
    return e;
  }
  MEMTUNE_TRY(YAML::Node base, internal::LoadEmbeddedYaml(*text, "recipe " + name));
  MEMTUNE_RETURN_IF_ERROR(MergeInto(base, root));
  base["memtune"]["recipe"] = name;
  return base;
}

// The value at a dotted document path, or an undefined node. (reset, not operator=:
// yaml-cpp's assignment would write node[part] into the tree `node` refers to.)
YAML::Node ValueAt(const YAML::Node& root, const std::string& path) {
  YAML::Node node = root;
  for (const std::string& part : SplitPath(path)) {
    if (!node.IsMap() || !node[part]) return YAML::Node(YAML::NodeType::Undefined);
    node.reset(node[part]);
  }
  return node;
}

// Whether a field's value turns its feature on: not null, false, 0 or empty.
bool IsSet(const YAML::Node& value) {
  if (!value.IsDefined() || value.IsNull()) return false;
  if (value.IsSequence() || value.IsMap()) return value.size() > 0;
  const std::string& text = value.Scalar();
  return !(text.empty() || text == "false" || text == "False" || text == "0");
}

// Whether a Bridge value is one of the entry's inert values ("1.0|1"); a map in Bridge's
// instantiation form is compared by its _target_ ("torch.float32").
bool IsInert(const YAML::Node& value, const IgnoredInput& entry) {
  std::string text;
  if (value.IsScalar()) text = value.Scalar();
  if (value.IsMap() && value["_target_"] && value["_target_"].IsScalar()) {
    text = value["_target_"].Scalar();
  }
  if (text.empty()) return false;
  const std::string inert = std::string("|") + entry.inert + "|";
  return inert.size() > 2 && inert.find("|" + text + "|") != std::string::npos;
}

// Whether a Bridge field's value changes memory: a set value that is not inert, or, for
// the negation of a flag (model.bias_dropout_fusion), a false one.
bool ChangesMemory(const YAML::Node& value, const IgnoredMatch& match) {
  if (match.negated) return value.IsDefined() && !value.IsNull() && !IsSet(value);
  return IsSet(value) && !IsInert(value, *match.entry);
}

// ignored_fields.h: an ignored input that changes memory is a visible warning (a Bridge
// field only when its value does: dumps list every field, mostly at their defaults).
void WarnMemoryRelevantIgnored(const YAML::Node& root, JobDocument& doc) {
  for (const std::string& name : doc.ignored_fields) {
    const IgnoredMatch match = ClassifyIgnored(name);
    if (match.entry == nullptr || !match.entry->memory_relevant) continue;
    if (name.rfind("--", 0) != 0 && !ChangesMemory(ValueAt(root, name), match)) continue;
    doc.warnings.push_back(name + " is not modelled: " + match.entry->effect +
                           "; memtune's figures leave it out (docs/ignored-fields.md)");
  }
}

}  // namespace

Result<JobDocument> ComposeJob(const JobInputs& inputs, const ParseOptions& options) {
  // A torchtitan TOML config: read through its translation to an fsdp2 job.
  std::optional<internal::TomlJob> toml;
  if (internal::LooksLikeToml(inputs.document)) {
    MEMTUNE_TRY(toml,
                internal::TorchtitanTomlToJob(
                    inputs.document, options.source_name.empty() ? "JOB" : options.source_name));
  }
  const std::string& document = toml ? toml->yaml : inputs.document;
  MEMTUNE_TRY(YAML::Node root, internal::LoadYamlText(document, options.source_name));
  if (root.IsNull() || !root.IsDefined()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) return internal::ParseJobNode(root, options);
  MEMTUNE_TRY(root, StartFromRecipe(root, inputs.overrides));
  std::vector<std::string> ignored_flags;
  std::string vocab_hint;
  if (!inputs.megatron_args.empty()) {
    MEMTUNE_TRY(const MegatronArgsJob args, MegatronArgsToJobNode(inputs.megatron_args));
    MEMTUNE_RETURN_IF_ERROR(MergeInto(root, args.job));
    ignored_flags = args.ignored_flags;
    vocab_hint = args.vocab_hint;
  }
  std::map<std::string, std::string> origins;
  for (const JobOverride& o : inputs.overrides) {
    MEMTUNE_RETURN_IF_ERROR(SetPath(root, o));
    origins[o.path] = o.origin;
  }
  auto doc = internal::ParseJobNode(root, options);
  if (!doc) {
    Error e = Attribute(doc.error(), origins);
    if (e.field == "model.vocab_size" && !vocab_hint.empty()) e.hint = vocab_hint;
    return e;
  }
  MEMTUNE_RETURN_IF_ERROR(internal::RefuseUnknownOverrides(inputs.overrides, *doc));
  for (const std::string& flag : ignored_flags) doc->ignored_fields.push_back(flag);
  if (toml) {
    for (const std::string& key : toml->ignored) doc->ignored_fields.push_back("torchtitan " + key);
    doc->warnings.insert(doc->warnings.end(), toml->warnings.begin(), toml->warnings.end());
    if (!ValueAt(root, "memtune.world_size").IsDefined()) {
      doc->warnings.push_back(
          "the torchtitan config names no GPU count (torchtitan takes it from the launcher's "
          "NGPU): memtune assumed " +
          std::to_string(doc->job.memtune.world_size) + "; pass --gpus N");
    }
  }
  WarnMemoryRelevantIgnored(root, *doc);
  return doc;
}

}  // namespace memtune::model

namespace memtune::model {

bool LooksLikeHfConfig(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || text[first] != '{') return false;
  const nlohmann::json root = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (root.is_discarded() || !root.is_object()) return false;
  return root.contains("model_type") &&
         (root.contains("num_hidden_layers") || root.contains("architectures"));
}

std::string YamlQuoted(std::string_view text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("''") : std::string(1, c);
  return quoted + "'";
}

std::string HfConfigJobDocument(const std::string& path) {
  return "model:\n  hf_config: " + YamlQuoted(path) + "\n";
}

}  // namespace memtune::model
