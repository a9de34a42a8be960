// ParseJobText: YAML/JSON text -> JobSpec -> ResolveJob -> JobDocument. Reads each section
// through its field table (job_schema*.cc) into the declared job, applies the document-level
// rules (seq_length agreement), then ResolveJob applies Bridge's effective-value rules in
// Bridge's order (runtime_config_update: mixed precision, then validate's sync rules).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "memtune/core/file.h"
#include "memtune/core/suggest.h"
#include "memtune/model/catalog.h"
#include "model/hf_config.h"
#include "model/job_parse_internal.h"
#include "model/job_yaml.h"

namespace memtune::model {
namespace internal {
namespace {

// The sections memtune reads, in document order.
const std::vector<std::string>& KnownSections() {
  static const std::vector<std::string> kSections = {"model",   "train",           "optimizer",
                                                     "ddp",     "mixed_precision", "peft",
                                                     "dataset", "memtune",         "comm_overlap"};
  return kSections;
}

// ConfigContainer sections memtune does not use (Megatron-Bridge training/config.py).
bool IsBridgeSection(const std::string& key) {
  static const std::vector<std::string> kBridge = {"rng",
                                                   "rerun_state_machine",
                                                   "validation",
                                                   "scheduler",
                                                   "logger",
                                                   "tokenizer",
                                                   "checkpoint",
                                                   "dist",
                                                   "ft",
                                                   "straggler",
                                                   "nvrx_straggler",
                                                   "profiling",
                                                   "tensor_inspect",
                                                   "inprocess_restart",
                                                   "optimizer_config_override_provider",
                                                   "data_parallel_size"};
  return key.rfind('_', 0) == 0 || std::find(kBridge.begin(), kBridge.end(), key) != kBridge.end();
}

const FieldSpec* FindField(const SectionSpec& spec, const std::string& name) {
  for (const FieldSpec& f : spec.fields) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::vector<std::string> FieldNames(const SectionSpec& spec) {
  std::vector<std::string> names;
  for (const FieldSpec& f : spec.fields) names.push_back(f.name);
  return names;
}

// A key the table does not have: an error in strict sections, else ignored (with a
// did-you-mean warning for a near miss that is not itself an upstream field).
Status HandleUnknown(const std::string& key, const SectionSpec& spec, ParseContext& ctx) {
  const std::string path = spec.path + "." + key;
  const std::vector<std::string> names = FieldNames(spec);
  if (spec.strict) {
    return InvalidConfig(path, path + " is not a " + spec.path + " field", AllowedHint(key, names));
  }
  ctx.doc.ignored_fields.push_back(path);
  const auto& quiet = spec.quiet_unused;
  if (key.rfind('_', 0) == 0 || std::find(quiet.begin(), quiet.end(), key) != quiet.end()) {
    return OkStatus();
  }
  if (std::string near = Suggest(key, names); !near.empty()) {
    ctx.Warn(path + " is not a field memtune uses; did you mean '" + near + "'? (ignored)");
  }
  return OkStatus();
}

// yaml-cpp does not apply YAML 1.1 merge keys: "<<: *base" stays a key named "<<", and the
// fields it was meant to bring in would be ignored (a wrong job without a word).
Status RefuseMergeKey(const std::string& key, const std::string& path) {
  if (key != "<<") return OkStatus();
  return InvalidInput(
      path, path + " is a YAML merge key ('<<'), which memtune does not apply",
      "allowed: write the merged fields out (anchors and aliases of whole values work)");
}

Status CheckKeys(const YAML::Node& node, const SectionSpec& spec, ParseContext& ctx) {
  std::vector<std::string> seen;
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    MEMTUNE_RETURN_IF_ERROR(RefuseMergeKey(key, spec.path + "." + key));
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      return InvalidInput(spec.path + "." + key, spec.path + "." + key + " is given twice");
    }
    seen.push_back(key);
    if (!FindField(spec, key)) MEMTUNE_RETURN_IF_ERROR(HandleUnknown(key, spec, ctx));
  }
  return OkStatus();
}

// A mapping's values by key, read once. yaml-cpp's node[key] scans the mapping and decodes
// every key to compare, so reading a section field by field cost fields x keys decodes (the
// larger part of composing a job). Only scalar keys can name a field; a repeated key is
// refused by CheckKeys before the index is read.
class KeyIndex {
 public:
  KeyIndex() = default;  // an absent section: every field undefined
  explicit KeyIndex(const YAML::Node& map) {
    for (const auto& kv : map) {
      if (kv.first.IsScalar()) values_.emplace(kv.first.Scalar(), kv.second);
    }
  }
  // The value under `key`, or an undefined node when the mapping has none.
  YAML::Node Get(const std::string& key) const {
    const auto it = values_.find(key);
    return it == values_.end() ? YAML::Node(YAML::NodeType::Undefined) : it->second;
  }

 private:
  std::unordered_map<std::string, YAML::Node> values_;
};

}  // namespace

Status ReadSection(const YAML::Node& node, const SectionSpec& spec, ParseContext& ctx) {
  const bool has_map = node && node.IsMap();
  if (node && !node.IsNull() && !has_map) {
    return WrongType(node, spec.path, "a mapping", "a mapping of " + spec.path + " fields");
  }
  if (has_map) MEMTUNE_RETURN_IF_ERROR(CheckKeys(node, spec, ctx));
  const KeyIndex section = has_map ? KeyIndex(node) : KeyIndex();
  for (const FieldSpec& f : spec.fields) {
    // Not YAML::Node(): a default-constructed node is a defined null.
    const YAML::Node value = section.Get(f.name);
    if (f.subsection) {
      MEMTUNE_RETURN_IF_ERROR(ReadSection(value, *f.subsection, ctx));
      continue;
    }
    if (!value || (value.IsNull() && !f.null_is_value)) continue;
    MEMTUNE_RETURN_IF_ERROR(f.read(value, spec.path + "." + f.name, ctx.spec));
    ctx.present.insert(spec.path + "." + (f.alias_of.empty() ? f.name : f.alias_of));
  }
  for (const FieldSpec& f : spec.fields) {
    const std::string path = spec.path + "." + f.name;
    if (!f.write || f.subsection || !f.alias_of.empty() || ctx.Has(path)) continue;
    ctx.doc.defaulted_fields[path] = f.memory_default ? f.memory_default : "";
  }
  return OkStatus();
}

namespace {

Result<std::string> ReadFromDisk(const std::string& path) {
  return ReadInputFile(path, "model.hf_config");
}

// The architecture a model.preset or model.hf_config names, as a model mapping.
Result<YAML::Node> BaseModelNode(const YAML::Node& model, const ParseOptions& options) {
  const YAML::Node preset = model["preset"];
  const YAML::Node hf = model["hf_config"];
  const bool has_preset = preset && !preset.IsNull();
  const bool has_hf = hf && !hf.IsNull();
  if (has_preset && has_hf) {
    return InvalidConfig("model.hf_config", "model.preset and model.hf_config are both given",
                         "allowed: one of them (explicit model fields override either)");
  }
  if (has_preset) {
    MEMTUNE_TRY(const std::string name, ToName(preset, "model.preset"));
    auto text = ModelPresetYaml(name);
    if (!text)
      return Error{text.error().code, "model.preset", text.error().message, text.error().hint};
    MEMTUNE_TRY(const YAML::Node catalog, LoadEmbeddedYaml(*text, "preset " + name));
    const YAML::Node fields = catalog["model"];
    if (!fields || !fields.IsMap()) {
      return Error{ErrorCode::kInternal, "model.preset",
                   "catalog entry '" + name + "' has no model mapping", ""};
    }
    return fields;  // LoadEmbeddedYaml gave a private copy
  }
  if (has_hf) {
    MEMTUNE_TRY(const std::string file, ToName(hf, "model.hf_config"));
    std::filesystem::path path(file);
    if (path.is_relative() && !options.base_dir.empty()) path = options.base_dir / path;
    const FileReader read = options.read_file ? options.read_file : ReadFromDisk;
    MEMTUNE_TRY(const std::string json, read(path.string()));
    return HfConfigToModelNode(json, "model.hf_config");
  }
  return YAML::Node(YAML::NodeType::Map);
}

// model: the preset / hf_config fields first, then the document's explicit fields.
Status ReadModel(const YAML::Node& model, const ParseOptions& options, ParseContext& ctx) {
  if (!model || model.IsNull())
    return ReadSection(YAML::Node(YAML::NodeType::Undefined), ModelTable(), ctx);
  if (!model.IsMap()) return WrongType(model, "model", "a mapping", "a mapping of model fields");
  MEMTUNE_TRY(YAML::Node merged, BaseModelNode(model, options));
  for (const auto& kv : model) {
    ctx.model_explicit.insert(kv.first.Scalar());
    merged[kv.first.Scalar()] = kv.second;
  }
  // Duplicate keys vanish in the merge; check them on the document's own mapping.
  std::vector<std::string> seen;
  for (const auto& kv : model) {
    if (std::find(seen.begin(), seen.end(), kv.first.Scalar()) != seen.end()) {
      return InvalidInput("model." + kv.first.Scalar(),
                          "model." + kv.first.Scalar() + " is given twice");
    }
    seen.push_back(kv.first.Scalar());
  }
  return ReadSection(merged, ModelTable(), ctx);
}

// peft: null = full training; "lora" / "dora" shorthand; or a LoRA/DoRA mapping.
Status ReadPeft(const YAML::Node& peft, ParseContext& ctx) {
  if (!peft || peft.IsNull()) return OkStatus();
  ctx.spec.peft.emplace();
  if (peft.IsScalar()) {
    MEMTUNE_RETURN_IF_ERROR(FindField(PeftTable(), "_target_")->read(peft, "peft", ctx.spec));
    ctx.present.insert("peft._target_");
    return ReadSection(YAML::Node(YAML::NodeType::Undefined), PeftTable(), ctx);
  }
  MEMTUNE_RETURN_IF_ERROR(ReadSection(peft, PeftTable(), ctx));
  if (const YAML::Node ex = peft["exclude_modules"]; ex && ex.IsSequence() && ex.size() > 0) {
    ctx.Warn("peft.exclude_modules is not modelled; memtune adapts peft.target_modules");
  }
  return OkStatus();
}

// Bridge's ConfigContainer.env_vars: defaults for memtune.env (the launch environment wins).
void ReadEnvVars(const YAML::Node& env_vars, ParseContext& ctx) {
  if (!env_vars || !env_vars.IsMap()) return;
  for (const auto& kv : env_vars) {
    if (kv.second.IsScalar()) ctx.spec.memtune.env.emplace(kv.first.Scalar(), kv.second.Scalar());
  }
}

Status CheckTopLevel(const YAML::Node& root, ParseContext& ctx) {
  std::vector<std::string> seen;
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    MEMTUNE_RETURN_IF_ERROR(RefuseMergeKey(key, key));
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      return InvalidInput(key, key + " is given twice");
    }
    seen.push_back(key);
    const auto& known = KnownSections();
    if (std::find(known.begin(), known.end(), key) != known.end() || key == "env_vars") continue;
    ctx.doc.ignored_fields.push_back(key);
    if (IsBridgeSection(key)) continue;
    if (std::string near = Suggest(key, known); !near.empty()) {
      ctx.Warn("'" + key + "' is not a section memtune uses; did you mean '" + near +
               "'? (ignored)");
    }
  }
  return OkStatus();
}

// A Bridge dump of a Gemma 2 / 3 model names its layer spec (transformer_layer_spec:
// {_target_: megatron.bridge.models.gemma.gemma2_provider.gemma2_layer_spec}), whose
// linear_proj and linear_fc2 carry post norms: sublayer_post_norms, unless the job says.
void ReadGemmaLayerSpec(const YAML::Node& model, ParseContext& ctx) {
  if (!model || !model.IsMap() || model["sublayer_post_norms"]) return;
  YAML::Node spec = model["transformer_layer_spec"];
  if (spec && spec.IsMap()) spec = spec["_target_"];
  if (!spec || !spec.IsScalar()) return;
  const std::string& target = spec.Scalar();
  for (const std::string_view name : {"gemma2_layer_spec", "gemma3_layer_spec"}) {
    if (target.size() >= name.size() &&
        target.compare(target.size() - name.size(), name.size(), name) == 0) {
      ctx.spec.model.sublayer_post_norms = true;
    }
  }
}

Status ReadSections(const YAML::Node& root, const ParseOptions& options, ParseContext& ctx) {
  MEMTUNE_RETURN_IF_ERROR(ReadModel(root["model"], options, ctx));
  ReadGemmaLayerSpec(root["model"], ctx);
  MEMTUNE_RETURN_IF_ERROR(ReadSection(root["train"], TrainTable(), ctx));
  MEMTUNE_RETURN_IF_ERROR(ReadSection(root["optimizer"], OptimizerTable(), ctx));
  MEMTUNE_RETURN_IF_ERROR(ReadSection(root["ddp"], DdpTable(), ctx));
  MEMTUNE_RETURN_IF_ERROR(ReadSection(root["dataset"], DatasetTable(), ctx));
  MEMTUNE_RETURN_IF_ERROR(ReadSection(root["memtune"], MemtuneTable(), ctx));
  MEMTUNE_RETURN_IF_ERROR(ReadPeft(root["peft"], ctx));
  ReadEnvVars(root["env_vars"], ctx);
  const YAML::Node memtune = root["memtune"];
  if (memtune && memtune.IsMap() && memtune["fsdp2"] &&
      ctx.spec.memtune.framework != Framework::kFsdp2) {
    ctx.Warn("memtune.fsdp2 is ignored unless memtune.framework is fsdp2");
  }
  return OkStatus();
}

}  // namespace

Result<JobDocument> ParseJobNode(const YAML::Node& root, const ParseOptions& options) {
  if (root && !root.IsNull() && !root.IsMap()) {
    return WrongType(root, options.source_name, "a job document",
                     "a mapping of sections (model, train, optimizer, ddp, mixed_precision, "
                     "peft, dataset, memtune)");
  }
  ParseContext ctx;
  ApplyUpstreamDefaults(ctx.spec);
  const YAML::Node doc = root && root.IsMap() ? root : YAML::Node(YAML::NodeType::Map);
  MEMTUNE_RETURN_IF_ERROR(CheckTopLevel(doc, ctx));
  MEMTUNE_RETURN_IF_ERROR(ReadSections(doc, options, ctx));
  MEMTUNE_RETURN_IF_ERROR(ApplyMixedPrecision(doc["mixed_precision"], ctx));
  MEMTUNE_RETURN_IF_ERROR(ApplyCommOverlap(doc["comm_overlap"], ctx));
  MEMTUNE_RETURN_IF_ERROR(DeriveDefaults(doc["dataset"], ctx));
  NoteSyncRules(ctx);
  MEMTUNE_TRY(ctx.doc.job, ResolveJob(ctx.spec));
  ClearSyncedDefaults(ctx);
  ListMemoryDefaults(ctx);
  ctx.doc.spec = std::move(ctx.spec);
  return std::move(ctx.doc);
}

bool IsReadBridgeField(const std::string& path) {
  const std::size_t dot = path.find('.');
  if (dot == std::string::npos) return false;
  const std::string section = path.substr(0, dot);
  const std::string field = path.substr(dot + 1);
  if (section == "mixed_precision") return IsMixedPrecisionField(field);
  const std::pair<const char*, const SectionSpec& (*)()> kTables[] = {
      {"model", ModelTable}, {"train", TrainTable},     {"optimizer", OptimizerTable},
      {"ddp", DdpTable},     {"dataset", DatasetTable}, {"peft", PeftTable}};
  for (const auto& [name, table] : kTables) {
    if (section == name) return FindField(table(), field) != nullptr;
  }
  return false;
}

}  // namespace internal

Result<JobDocument> ParseJobText(std::string_view text, const ParseOptions& options) {
  MEMTUNE_TRY(const YAML::Node root, internal::LoadYamlText(text, options.source_name));
  return internal::ParseJobNode(root, options);
}

}  // namespace memtune::model
