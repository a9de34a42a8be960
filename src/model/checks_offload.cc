// Activation offloading rules: layer-level CPU offloading (cpu_offloading*) and
// fine-grained activation offloading (offload_modules).
#include "model/checks_internal.h"

namespace memtune::model::checks {
namespace {

constexpr const char* kCpuOffloading = "model.cpu_offloading";
constexpr const char* kFineGrained = "model.fine_grained_activation_offloading";
constexpr const char* kOffloadModules = "model.offload_modules";

Violations NumLayers(const Job& job) {
  const auto& m = job.model;
  if (!m.cpu_offloading || m.num_layers < 1) return {};
  if (m.cpu_offloading_num_layers >= 0 && m.cpu_offloading_num_layers < m.num_layers) return {};
  return {Violation{{{"model.cpu_offloading_num_layers", Str(m.cpu_offloading_num_layers)},
                     {"model.num_layers", Str(m.num_layers)}},
                    "CPU offloading can be done only for layers less than " + Str(m.num_layers),
                    "set cpu_offloading_num_layers between 0 and " + Str(m.num_layers - 1)}};
}

// The playbook's "CPU offloading requires pipeline_model_parallel_size = 1".
Violations WithPipeline(const Job& job) {
  const auto& m = job.model;
  if (!m.cpu_offloading || m.pipeline_model_parallel_size <= 1) return {};
  return {Violation{{{kCpuOffloading, "true"},
                     {"model.pipeline_model_parallel_size", Str(m.pipeline_model_parallel_size)}},
                    "Currently there is no support for Pipeline parallelism with CPU offloading",
                    "set pipeline_model_parallel_size: 1 or cpu_offloading: false"}};
}

Violations WithRecompute(const Job& job) {
  const auto& m = job.model;
  if (!m.cpu_offloading || m.recompute_granularity == RecomputeGranularity::kNone) return {};
  return {
      Violation{{{kCpuOffloading, "true"},
                 {"model.recompute_granularity",
                  m.recompute_granularity == RecomputeGranularity::kFull ? "full" : "selective"}},
                "CPU offloading does not work when activation recomputation is enabled",
                "set recompute_granularity: null or cpu_offloading: false"}};
}

Violations WithCudaGraphs(const Job& job) {
  const auto& m = job.model;
  if (!m.cpu_offloading || m.cuda_graph_impl == CudaGraphImpl::kNone ||
      m.cuda_graph_impl == CudaGraphImpl::kFullIteration) {
    return {};
  }
  return {
      Violation{{{kCpuOffloading, "true"}, {"model.cuda_graph_impl", NameOf(m.cuda_graph_impl)}},
                "CUDA graphs not supported with CPU offloading",
                "set cuda_graph_impl: none (or full_iteration), or cpu_offloading: false"}};
}

// MCore offloads `cpu_offloading_num_layers` layers' activations and/or weights: with zero
// layers or neither kind selected the flag costs pinned host memory and moves nothing.
Violations NothingOffloaded(const Job& job) {
  const auto& m = job.model;
  if (!m.cpu_offloading) return {};
  if (m.cpu_offloading_num_layers > 0 &&
      (m.cpu_offloading_activations || m.cpu_offloading_weights)) {
    return {};
  }
  return {Violation{{{kCpuOffloading, "true"},
                     {"model.cpu_offloading_num_layers", Str(m.cpu_offloading_num_layers)},
                     {"model.cpu_offloading_activations", Bool(m.cpu_offloading_activations)},
                     {"model.cpu_offloading_weights", Bool(m.cpu_offloading_weights)}},
                    "cpu_offloading is on but offloads nothing (no layers, or neither "
                    "activations nor weights)",
                    "set cpu_offloading_num_layers > 0 and cpu_offloading_activations: true, or "
                    "cpu_offloading: false"}};
}

Violations FineGrainedExclusive(const Job& job) {
  const auto& m = job.model;
  if (!m.fine_grained_activation_offloading || !m.cpu_offloading) return {};
  return {Violation{{{kFineGrained, "true"}, {kCpuOffloading, "true"}},
                    "fine_grained_activation_offloading cannot be enabled with cpu_offloading",
                    "use one of the two: set cpu_offloading: false or "
                    "fine_grained_activation_offloading: false"}};
}

Violations ModulesValid(const Job& job) {
  const auto& m = job.model;
  if (!m.fine_grained_activation_offloading) return {};
  static const std::vector<std::string> kAllowed = {"core_attn",       "attn_proj",  "expert_fc1",
                                                    "fused_group_mlp", "moe_act",    "attn_norm",
                                                    "mlp_norm",        "qkv_linear", "gdp_qkv"};
  if (m.offload_modules.empty()) {
    return {One(kOffloadModules, "[]",
                "fine_grained_activation_offloading needs a non-empty offload_modules",
                "list the modules whose inputs to offload, e.g. [core_attn, attn_proj]")};
  }
  std::vector<std::string> invalid;
  for (const std::string& module : m.offload_modules) {
    if (!Contains(kAllowed, module)) invalid.push_back(module);
  }
  if (invalid.empty()) return {};
  return {One(kOffloadModules, List(m.offload_modules),
              "Invalid choices for offload_modules: " + List(invalid) +
                  ". Allowed modules are: " + List(kAllowed),
              "remove " + List(invalid) + " from offload_modules")};
}

Violations AttnProjNeedsCoreAttn(const Job& job) {
  const auto& m = job.model;
  if (!m.fine_grained_activation_offloading || !Contains(m.offload_modules, "attn_proj") ||
      Contains(m.offload_modules, "core_attn")) {
    return {};
  }
  return {One(kOffloadModules, List(m.offload_modules),
              "attn_proj cannot be set to offload_modules alone without core_attn because the "
              "input of attn_proj is the output of core_attn, which is needed in "
              "core_attn.backward()",
              "add core_attn to offload_modules, or remove attn_proj")};
}

Violations InsideRecomputedMoe(const Job& job) {
  const auto& m = job.model;
  if (!m.fine_grained_activation_offloading ||
      m.recompute_granularity != RecomputeGranularity::kSelective ||
      !Contains(m.recompute_modules, "moe")) {
    return {};
  }
  std::vector<std::string> inside;
  for (const char* name : {"moe_act", "expert_fc1", "fused_group_mlp"}) {
    if (Contains(m.offload_modules, name)) inside.push_back(name);
  }
  if (inside.empty()) return {};
  return {Violation{
      {{kOffloadModules, List(m.offload_modules)},
       {"model.recompute_modules", List(m.recompute_modules)}},
      "Cannot offload " + List(inside) + " while recomputing the entire MoE layer",
      "remove moe from recompute_modules, or remove " + List(inside) + " from offload_modules"}};
}

Violations FusedGroupMlp(const Job& job) {
  const auto& m = job.model;
  if (!m.fine_grained_activation_offloading || !Contains(m.offload_modules, "fused_group_mlp")) {
    return {};
  }
  std::vector<std::string> partial;
  for (const char* name : {"expert_fc1", "moe_act"}) {
    if (Contains(m.offload_modules, name)) partial.push_back(name);
  }
  if (partial.empty()) return {};
  return {One(kOffloadModules, List(m.offload_modules),
              "fused_group_mlp offloads the whole fused grouped MLP and cannot be combined with "
              "expert_fc1 or moe_act. Remove: " +
                  List(partial),
              "remove " + List(partial) + " from offload_modules")};
}

// MCore TransformerConfig.__post_init__, CUDA-graph block, fine-grained offloading part.
Violations FineGrainedCudaGraph(const Job& job) {
  const auto& m = job.model;
  if (!m.fine_grained_activation_offloading || m.cuda_graph_impl == CudaGraphImpl::kNone) return {};
  Violations out;
  const Fields base = {{"model.cuda_graph_impl", NameOf(m.cuda_graph_impl)},
                       {"model.cuda_graph_scope", List(m.cuda_graph_scope)},
                       {kOffloadModules, List(m.offload_modules)}};
  if (m.cuda_graph_impl == CudaGraphImpl::kLocal) {
    std::vector<std::string> unsupported;
    for (const std::string& module : m.offload_modules) {
      if (module != "expert_fc1" && module != "moe_act" && module != "fused_group_mlp") {
        unsupported.push_back(module);
      }
    }
    const bool whole_layer = m.cuda_graph_scope.empty() || Contains(m.cuda_graph_scope, "full");
    if (!unsupported.empty() || whole_layer) {
      out.push_back(Violation{base,
                              "fine-grained activation offloading with cuda_graph_impl='local' "
                              "only supports offload_modules 'expert_fc1', 'moe_act' and "
                              "'fused_group_mlp' and a partial (non whole-layer) graph scope",
                              "use cuda_graph_impl: transformer_engine, or offload only expert "
                              "modules with a partial cuda_graph_scope"});
    }
  }
  if (Contains(m.cuda_graph_scope, "moe")) {
    out.push_back(Violation{base,
                            "Token-drop MoE is temporarily not supported with activation "
                            "offloading",
                            "remove moe from cuda_graph_scope"});
  }
  return out;
}

constexpr Rule kRules[] = {
    {{"offload.num-layers", Severity::kError, RuleScope::kMegatron,
      "cpu_offloading_num_layers in [0, num_layers)", "lower cpu_offloading_num_layers",
      kMcoreTransformer},
     NumLayers},
    {{"offload.pp", Severity::kError, RuleScope::kMegatron,
      "cpu_offloading requires pipeline_model_parallel_size == 1",
      "set pipeline_model_parallel_size: 1 or cpu_offloading: false", kMcoreTransformer},
     WithPipeline},
    {{"offload.recompute", Severity::kError, RuleScope::kMegatron,
      "cpu_offloading excludes activation recompute",
      "set recompute_granularity: null or cpu_offloading: false", kMcoreTransformer},
     WithRecompute},
    {{"offload.cuda-graphs", Severity::kError, RuleScope::kMegatron,
      "cpu_offloading excludes CUDA graphs other than full_iteration",
      "cuda_graph_impl: none, or cpu_offloading: false", kMcoreTransformer},
     WithCudaGraphs},
    {{"offload.nothing-offloaded", Severity::kWarning, RuleScope::kMegatron,
      "cpu_offloading with zero layers or nothing selected has no effect",
      "offload at least one layer's activations or weights", "MCore get_cpu_offload_context"},
     NothingOffloaded},
    {{"offload.fine-grained-exclusive", Severity::kError, RuleScope::kMegatron,
      "fine_grained_activation_offloading excludes cpu_offloading", "use one of the two",
      kMcoreTransformer},
     FineGrainedExclusive},
    {{"offload.modules-valid", Severity::kError, RuleScope::kMegatron,
      "offload_modules is non-empty and lists known modules", "fix offload_modules",
      kMcoreTransformer},
     ModulesValid},
    {{"offload.attn-proj-needs-core-attn", Severity::kError, RuleScope::kMegatron,
      "offloading attn_proj requires offloading core_attn", "add core_attn", kMcoreTransformer},
     AttnProjNeedsCoreAttn},
    {{"offload.inside-recomputed-moe", Severity::kError, RuleScope::kMegatron,
      "no expert-module offload while the whole MoE is recomputed",
      "drop moe recompute or the expert offload", kMcoreTransformer},
     InsideRecomputedMoe},
    {{"offload.fused-group-mlp", Severity::kError, RuleScope::kMegatron,
      "fused_group_mlp excludes expert_fc1 and moe_act", "remove expert_fc1/moe_act",
      kMcoreTransformer},
     FusedGroupMlp},
    {{"offload.fine-grained-cuda-graph", Severity::kError, RuleScope::kMegatron,
      "fine-grained offloading with CUDA graphs: TE impl, or local with partial expert offload; "
      "no moe scope",
      "use cuda_graph_impl: transformer_engine", kMcoreTransformer},
     FineGrainedCudaGraph},
};

}  // namespace

std::span<const Rule> OffloadRules() { return kRules; }

}  // namespace memtune::model::checks
