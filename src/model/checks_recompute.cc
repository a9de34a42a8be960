// Activation-recompute rules: granularity/method/num_layers combinations, selective
// recompute modules and their prerequisites, distributed saved activations.
#include "model/checks_internal.h"

namespace memtune::model::checks {
namespace {

constexpr const char* kGranularity = "model.recompute_granularity";
constexpr const char* kMethod = "model.recompute_method";
constexpr const char* kNumLayers = "model.recompute_num_layers";
constexpr const char* kModules = "model.recompute_modules";

const char* GranularityName(RecomputeGranularity g) {
  switch (g) {
    case RecomputeGranularity::kNone:
      return "null";
    case RecomputeGranularity::kSelective:
      return "selective";
    case RecomputeGranularity::kFull:
      return "full";
  }
  return "null";
}
const char* MethodName(RecomputeMethod m) {
  switch (m) {
    case RecomputeMethod::kNone:
      return "null";
    case RecomputeMethod::kUniform:
      return "uniform";
    case RecomputeMethod::kBlock:
      return "block";
  }
  return "null";
}
bool Full(const ModelConfig& m) { return m.recompute_granularity == RecomputeGranularity::kFull; }
bool Selective(const ModelConfig& m) {
  return m.recompute_granularity == RecomputeGranularity::kSelective;
}
bool SelectiveWith(const ModelConfig& m, std::string_view module) {
  return Selective(m) && Contains(m.recompute_modules, module);
}
std::int64_t LayersPerRank(const ModelConfig& m) {
  return m.pipeline_model_parallel_size > 0 ? m.num_layers / m.pipeline_model_parallel_size : 0;
}

Violations FullNeedsMethod(const Job& job) {
  const auto& m = job.model;
  if (!Full(m) || m.recompute_method != RecomputeMethod::kNone) return {};
  return {Violation{{{kGranularity, "full"}, {kMethod, "null"}},
                    "Using recompute_granularity: full so recompute_method must be \"block\" or "
                    "\"uniform\"",
                    "set recompute_method: uniform (or block)"}};
}

Violations FullNeedsNumLayers(const Job& job) {
  const auto& m = job.model;
  if (!Full(m) || (m.recompute_num_layers && *m.recompute_num_layers >= 1)) return {};
  return {Violation{{{kGranularity, "full"}, {kNumLayers, Opt(m.recompute_num_layers)}},
                    "When using recompute_granularity: full recompute_num_layers must be between "
                    "1 and num_layers_per_pipeline_rank: " +
                        Str(LayersPerRank(m)),
                    "set recompute_num_layers (1 recomputes every layer with uniform)"}};
}

// MCore transformer_block._checkpointed_forward recomputes at most the layers a model chunk
// holds: a larger block count has no further effect.
Violations NumLayersRange(const Job& job) {
  const auto& m = job.model;
  const std::int64_t per_rank = LayersPerRank(m);
  if (!Full(m) || !m.recompute_num_layers || per_rank < 1 || *m.recompute_num_layers <= per_rank) {
    return {};
  }
  return {Violation{{{kNumLayers, Opt(m.recompute_num_layers)},
                     {"model.num_layers", Str(m.num_layers)},
                     {"model.pipeline_model_parallel_size", Str(m.pipeline_model_parallel_size)}},
                    "recompute_num_layers (" + Opt(m.recompute_num_layers) +
                        ") exceeds the layers per pipeline rank (" + Str(per_rank) + ")",
                    "set recompute_num_layers between 1 and " + Str(per_rank)}};
}

Violations SelectiveNumLayers(const Job& job) {
  const auto& m = job.model;
  if (!Selective(m) || !m.recompute_num_layers) return {};
  return {Violation{{{kGranularity, "selective"}, {kNumLayers, Opt(m.recompute_num_layers)}},
                    "When using recompute_granularity: selective recompute_num_layers must be "
                    "None",
                    "set recompute_num_layers: null"}};
}

Violations SelectiveMethod(const Job& job) {
  const auto& m = job.model;
  if (!Selective(m) || m.recompute_method == RecomputeMethod::kNone) return {};
  return {Violation{{{kGranularity, "selective"}, {kMethod, MethodName(m.recompute_method)}},
                    "recompute method is not yet supported for selective recomputing granularity",
                    "set recompute_method: null"}};
}

Violations NoGranularity(const Job& job) {
  const auto& m = job.model;
  if (m.recompute_granularity != RecomputeGranularity::kNone ||
      (m.recompute_method == RecomputeMethod::kNone && !m.recompute_num_layers)) {
    return {};
  }
  return {Violation{{{kGranularity, "null"},
                     {kMethod, MethodName(m.recompute_method)},
                     {kNumLayers, Opt(m.recompute_num_layers)}},
                    "recompute_method / recompute_num_layers have no effect without "
                    "recompute_granularity: nothing is recomputed",
                    "set recompute_granularity: full to recompute, or drop the two fields"}};
}

Violations DistributeSavedWithSp(const Job& job) {
  const auto& m = job.model;
  if (m.recompute_granularity == RecomputeGranularity::kNone || !m.distribute_saved_activations ||
      !m.sequence_parallel) {
    return {};
  }
  return {Violation{
      {{"model.distribute_saved_activations", "true"}, {"model.sequence_parallel", "true"}},
      "distribute_saved_activations: True must be false when sequence parallel is "
      "enabled: True",
      "set distribute_saved_activations: false"}};
}

// Megatron-LM arguments.py, "Activation recomputing".
Violations DistributeSaved(const Job& job) {
  const auto& m = job.model;
  if (!m.distribute_saved_activations) return {};
  Violations out;
  const std::string path = "model.distribute_saved_activations";
  if (m.tensor_model_parallel_size <= 1) {
    out.push_back(Violation{
        {{path, "true"}, {"model.tensor_model_parallel_size", Str(m.tensor_model_parallel_size)}},
        "can distribute recomputed activations only across tensor model "
        "parallel groups",
        "set distribute_saved_activations: false, or TP > 1"});
  }
  if (!Full(m)) {
    out.push_back(
        Violation{{{path, "true"}, {kGranularity, GranularityName(m.recompute_granularity)}},
                  "distributed recompute activations is only application to full "
                  "recompute granularity",
                  "set recompute_granularity: full, or distribute_saved_activations: false"});
  } else if (m.recompute_method == RecomputeMethod::kNone) {
    out.push_back(Violation{{{path, "true"}, {kMethod, "null"}},
                            "for distributed recompute activations to work you need to use a "
                            "recompute method",
                            "set recompute_method: uniform (or block)"});
  }
  return out;
}

Violations ModulesValid(const Job& job) {
  const auto& m = job.model;
  if (!Selective(m)) return {};
  // MCore HEAD's allowed set (the Bridge-pinned commit lacks the gdp_* and mhc labels).
  static const std::vector<std::string> kAllowed = {
      "core_attn",      "moe_act",      "layernorm",   "mla_up_proj", "mlp", "moe",
      "shared_experts", "gdn_norm_out", "gdp_in_proj", "gdp_qkv",     "mhc"};
  std::vector<std::string> invalid;
  for (const std::string& module : m.recompute_modules) {
    if (!Contains(kAllowed, module)) invalid.push_back(module);
  }
  if (invalid.empty()) return {};
  return {One(kModules, List(m.recompute_modules),
              "Invalid choices for recompute_modules: " + List(invalid) +
                  ". Allowed modules are: " + List(kAllowed),
              "remove " + List(invalid) + " from recompute_modules")};
}

Violations MoeActNeedsGroupedGemm(const Job& job) {
  const auto& m = job.model;
  if (!SelectiveWith(m, "moe_act") || m.moe_grouped_gemm) return {};
  return {Violation{{{kModules, List(m.recompute_modules)}, {"model.moe_grouped_gemm", "false"}},
                    "moe_act in recompute_modules is only supported with moe_grouped_gemm",
                    "set moe_grouped_gemm: true, or remove moe_act from recompute_modules"}};
}

Violations MlaUpProjNeedsMla(const Job& job) {
  const auto& m = job.model;
  if (!SelectiveWith(m, "mla_up_proj") || m.multi_latent_attention) return {};
  return {
      Violation{{{kModules, List(m.recompute_modules)}, {"model.multi_latent_attention", "false"}},
                "mla_up_proj in recompute_modules is only supported with "
                "multi_latent_attention",
                "remove mla_up_proj from recompute_modules"}};
}

Violations CoreAttn(const Job& job) {
  const auto& m = job.model;
  if (!SelectiveWith(m, "core_attn")) return {};
  return {One(kModules, List(m.recompute_modules),
              "If you are using transformer_engine as the transformer implementation, the "
              "core_attn is from transformer_engine and may be the fused version. For fused "
              "attention, you have no need to set 'core_attn' to recompute",
              "with TE fused/flash attention, drop core_attn from recompute_modules (it saves "
              "little memory there) and recompute mlp or layernorm instead if memory is short")};
}

Violations SharedExpertsOverlap(const Job& job) {
  const auto& m = job.model;
  if (!SelectiveWith(m, "shared_experts") || !m.moe_shared_expert_intermediate_size ||
      !m.moe_shared_expert_overlap) {
    return {};
  }
  return {Violation{
      {{kModules, List(m.recompute_modules)}, {"model.moe_shared_expert_overlap", "true"}},
      "shared_experts recompute cannot work with --moe-shared-expert-overlap",
      "remove shared_experts from recompute_modules, or "
      "moe_shared_expert_overlap: false"}};
}

Violations Fp8DelayedModules(const Job& job) {
  const auto& m = job.model;
  if (m.fp8 == Fp8Format::kNone || m.fp8_recipe != Fp8Recipe::kDelayed) return {};
  if (!SelectiveWith(m, "moe_act") && !SelectiveWith(m, "layernorm")) return {};
  return {Violation{{{kModules, List(m.recompute_modules)},
                     {"model.fp8", NameOf(m.fp8)},
                     {"model.fp8_recipe", "delayed"}},
                    "Delayed scaling does not support moe_act and layernorm recompute for fp8",
                    "use fp8_recipe: tensorwise (current scaling), or remove moe_act/layernorm "
                    "from recompute_modules"}};
}

constexpr Rule kRules[] = {
    {{"recompute.full-needs-method", Severity::kError, RuleScope::kMegatron,
      "full recompute requires recompute_method (uniform | block)", "recompute_method: uniform",
      kMcoreTransformer},
     FullNeedsMethod},
    {{"recompute.full-needs-num-layers", Severity::kError, RuleScope::kMegatron,
      "full recompute requires recompute_num_layers >= 1", "recompute_num_layers: 1",
      kMcoreTransformer},
     FullNeedsNumLayers},
    {{"recompute.num-layers-range", Severity::kWarning, RuleScope::kMegatron,
      "recompute_num_layers <= layers per pipeline rank", "lower recompute_num_layers",
      "MCore TransformerBlock._checkpointed_forward"},
     NumLayersRange},
    {{"recompute.selective-num-layers", Severity::kError, RuleScope::kMegatron,
      "selective recompute requires recompute_num_layers: null", "recompute_num_layers: null",
      kMcoreTransformer},
     SelectiveNumLayers},
    {{"recompute.selective-method", Severity::kError, RuleScope::kMegatron,
      "selective recompute forbids recompute_method", "recompute_method: null", kMlmArgs},
     SelectiveMethod},
    {{"recompute.no-granularity", Severity::kWarning, RuleScope::kMegatron,
      "recompute_method / recompute_num_layers without recompute_granularity do nothing",
      "set recompute_granularity or drop them", kMcoreTransformer},
     NoGranularity},
    {{"recompute.distribute-saved-sp", Severity::kError, RuleScope::kMegatron,
      "distribute_saved_activations excludes sequence_parallel",
      "distribute_saved_activations: false", kMcoreTransformer},
     DistributeSavedWithSp},
    {{"recompute.distribute-saved", Severity::kError, RuleScope::kMegatron,
      "distribute_saved_activations requires TP > 1, full granularity and a method",
      "distribute_saved_activations: false", kMlmArgs},
     DistributeSaved},
    {{"recompute.modules-valid", Severity::kError, RuleScope::kMegatron,
      "selective recompute_modules are known labels", "remove unknown labels", kMcoreTransformer},
     ModulesValid},
    {{"recompute.moe-act-grouped-gemm", Severity::kError, RuleScope::kMegatron,
      "moe_act recompute requires moe_grouped_gemm", "moe_grouped_gemm: true", kMcoreTransformer},
     MoeActNeedsGroupedGemm},
    {{"recompute.mla-up-proj", Severity::kError, RuleScope::kMegatron,
      "mla_up_proj recompute requires multi_latent_attention", "remove mla_up_proj",
      kMcoreTransformer},
     MlaUpProjNeedsMla},
    {{"recompute.core-attn", Severity::kWarning, RuleScope::kMegatron,
      "core_attn recompute is usually unnecessary with TE fused attention",
      "drop core_attn; recompute mlp/layernorm instead", kMcoreTransformer},
     CoreAttn},
    {{"recompute.shared-experts-overlap", Severity::kError, RuleScope::kMegatron,
      "shared_experts recompute excludes moe_shared_expert_overlap",
      "remove shared_experts or the overlap", kMcoreTransformer},
     SharedExpertsOverlap},
    {{"recompute.fp8-delayed-modules", Severity::kError, RuleScope::kMegatron,
      "fp8 delayed scaling excludes moe_act / layernorm recompute",
      "use current scaling or other modules", kMcoreTransformer},
     Fp8DelayedModules},
};

}  // namespace

std::span<const Rule> RecomputeRules() { return kRules; }

}  // namespace memtune::model::checks
