// The parser's shared state and its stages (job_parse.cc drives them in Bridge's order:
// sections, defaults, mixed precision, sync rules). Private to src/model.
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
  JobDocument doc;
  // Field paths the document gave ("model.hidden_size"), after preset / hf_config merge.
  std::set<std::string> present;
  // model keys written in the document itself (not taken from model.preset/hf_config).
  std::set<std::string> model_explicit;

  bool Has(const std::string& path) const { return present.count(path) > 0; }
  void Warn(std::string text) { doc.warnings.push_back(std::move(text)); }
};

// Sets the defaults of Megatron-Core / Bridge that differ from the Job struct's
// initializers (GPTModelProvider.cross_entropy_loss_fusion = True, ...). (job_derive.cc)
void ApplyUpstreamDefaults(Job& job);

// Reads `node` (a mapping, or null = all absent) with `spec` into ctx.doc.job: records
// present and defaulted fields, ignores (or, for strict sections, rejects) unknown fields.
// Errors: the first field error; "<path> is not a mapping"; unknown field in a strict section.
Status ReadSection(const YAML::Node& node, const SectionSpec& spec, ParseContext& ctx);

// Reads `mixed_precision` (null, a preset name, or a mapping of MixedPrecisionConfig
// fields, optionally with `preset:`) and applies it onto model, optimizer and ddp as
// Bridge's MixedPrecisionConfig.setup() does. (job_precision.cc)
Status ApplyMixedPrecision(const YAML::Node& node, ParseContext& ctx);

// Fills the derived defaults (ffn = 4h, kv_channels = h / heads, world size, global batch,
// seq_length agreement, ...). `dataset` is the document's dataset section. (job_derive.cc)
Status DeriveDefaults(const YAML::Node& dataset, ParseContext& ctx);

// Bridge's sync rules after mixed precision: fp8_param / fp8_param_gather, distributed
// optimizer in ddp and optimizer, Megatron-FSDP forcing the distributed optimizer.
void ApplySyncRules(ParseContext& ctx);

// Fills ctx.doc.defaults_used from the defaulted fields whose default changes memory.
void ListMemoryDefaults(ParseContext& ctx);

// The value of a field as a short text ("64", "true", "[core_attn]", "bf16").
std::string JsonText(const Json& value);

}  // namespace memtune::model::internal
