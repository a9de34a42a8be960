// The parser's shared state and its stages (job_parse.cc drives them in Bridge's order:
// sections, mixed precision, seq_length agreement, then ResolveJob). The stages read the
// document into a JobSpec and note what the rules will do (warnings, defaulted fields);
// ResolveJob (job_resolve.cc) applies the rules. Private to src/model.
#pragma once

#include <yaml-cpp/yaml.h>

#include <set>
#include <string>

#include "memtune/core/result.h"
#include "memtune/model/job_parse.h"
#include "model/job_schema.h"

namespace memtune::model::internal {

// What one parse has read so far.
struct ParseContext {
  JobSpec spec;     // the document as read so far
  JobDocument doc;  // doc.job and doc.spec are set at the end
  // Field paths the document gave ("model.hidden_size"), after preset / hf_config merge.
  std::set<std::string> present;
  // model keys written in the document itself (not taken from model.preset/hf_config).
  std::set<std::string> model_explicit;

  bool Has(const std::string& path) const { return present.count(path) > 0; }
  void Warn(std::string text) { doc.warnings.push_back(std::move(text)); }
};

// Sets the defaults of Megatron-Core / Bridge that differ from the struct initializers
// (GPTModelProvider.cross_entropy_loss_fusion = True, ...). (job_derive.cc)
void ApplyUpstreamDefaults(JobSpec& spec);

// Reads `node` (a mapping, or null = all absent) with `spec` into ctx.spec: records
// present and defaulted fields, ignores (or, for strict sections, rejects) unknown fields.
// Errors: the first field error; "<path> is not a mapping"; unknown field in a strict section.
Status ReadSection(const YAML::Node& node, const SectionSpec& spec, ParseContext& ctx);

// Applies Bridge's comm_overlap section (CommOverlapConfig.setup) onto the model, ddp and
// optimizer fields read so far. (job_comm_overlap.cc)
Status ApplyCommOverlap(const YAML::Node& node, ParseContext& ctx);

// Reads `mixed_precision` (null, a preset name, or a mapping of MixedPrecisionConfig
// fields, optionally with `preset:`) into ctx.spec.mixed_precision, and warns about each
// document field its setup() will override. (job_precision.cc)
Status ApplyMixedPrecision(const YAML::Node& node, ParseContext& ctx);

// Whether memtune reads a MixedPrecisionConfig field ("fp8_recipe"; "preset" too).
// (job_precision.cc)
bool IsMixedPrecisionField(const std::string& name);

// Whether memtune reads a Bridge field ("model.num_layers", "mixed_precision.fp8"): the
// section tables and the mixed-precision fields; every other field is ignored.
bool IsReadBridgeField(const std::string& path);

// Bridge's MixedPrecisionConfig.finalize() and setup(): copies `mp` onto the precision
// fields of model, optimizer and ddp. (job_precision.cc; used by ResolveJob)
void SetupPrecision(MixedPrecisionConfig mp, ModelBase& model, Dtype& pipeline_dtype,
                    OptimizerConfig& optimizer, DdpConfig& ddp);

// Error unless the architecture sizes are given: "model.num_layers is required".
// (job_resolve.cc; the parser calls it before the seq_length rule, ResolveJob again)
Status RequireArchitecture(const ModelSpec& model);

// The document-level rules before ResolveJob: the architecture is required, model and
// dataset seq_length agree; warns about precision and offload defaults. `dataset` is the
// document's dataset section. (job_derive.cc)
Status DeriveDefaults(const YAML::Node& dataset, ParseContext& ctx);

// Warns about what Bridge's sync rules will change (ResolveJob applies them): Megatron-FSDP
// forcing the distributed optimizer, ddp and optimizer disagreeing on it.
void NoteSyncRules(ParseContext& ctx);

// After ResolveJob: the distributed-optimizer flags it turned on no longer count as
// defaulted.
void ClearSyncedDefaults(ParseContext& ctx);

// Fills ctx.doc.defaults_used from the defaulted fields whose default changes memory.
void ListMemoryDefaults(ParseContext& ctx);

// The value of a field as a short text ("64", "true", "[core_attn]", "bf16").
std::string JsonText(const Json& value);

}  // namespace memtune::model::internal
