// Mixture-of-experts rules: expert layout (EP, ETP, expert data parallel), expert counts,
// shared experts, and the EP communication-overlap prerequisites.
#include <algorithm>

#include "model/checks_internal.h"

namespace memtune::model::checks {
namespace {

constexpr const char* kEp = "model.expert_model_parallel_size";
constexpr const char* kExperts = "model.num_moe_experts";
constexpr const char* kOverlap = "model.overlap_moe_expert_parallel_comm";

Violations EpNeedsExperts(const Job& job) {
  const auto& m = job.model;
  if (m.expert_model_parallel_size <= 1 || m.num_moe_experts) return {};
  return {Violation{{{kEp, Str(m.expert_model_parallel_size)}, {kExperts, "null"}},
                    "num_moe_experts must be non None to use expert-parallel",
                    "set expert_model_parallel_size: 1 for a dense model, or num_moe_experts"}};
}

// torch.topk in MCore's TopKRouter cannot pick more experts than there are.
Violations TopkWithinExperts(const Job& job) {
  const auto& m = job.model;
  if (!m.num_moe_experts || *m.num_moe_experts <= 0 || m.moe_router_topk <= *m.num_moe_experts)
    return {};
  return {Violation{
      {{"model.moe_router_topk", Str(m.moe_router_topk)}, {kExperts, Str(*m.num_moe_experts)}},
      "moe_router_topk (" + Str(m.moe_router_topk) + ") must not exceed num_moe_experts (" +
          Str(*m.num_moe_experts) + ")",
      "set moe_router_topk to at most " + Str(*m.num_moe_experts)}};
}

Violations ExpertsPositive(const Job& job) {
  const auto& m = job.model;
  if (!m.num_moe_experts || *m.num_moe_experts > 0) return {};
  return {One(kExperts, Str(*m.num_moe_experts),
              "num_moe_experts must be non-negative (and "
              "non-zero): it is " +
                  Str(*m.num_moe_experts),
              "set num_moe_experts to the expert count, or null for a dense model")};
}

// Megatron-LM arguments.py; MCore MoELayer (local experts = experts / EP).
Violations ExpertsDivisibleByEp(const Job& job) {
  const auto& m = job.model;
  const int ep = m.expert_model_parallel_size;
  if (!m.num_moe_experts || *m.num_moe_experts <= 0 || ep < 1) return {};
  if (*m.num_moe_experts % ep == 0) return {};
  return {Violation{
      {{kExperts, Str(*m.num_moe_experts)}, {kEp, Str(ep)}},
      "Number of experts should be a multiple of expert model parallel_size: " +
          Str(*m.num_moe_experts) + " % " + Str(ep) + " = " + Str(*m.num_moe_experts % ep),
      "set expert_model_parallel_size to one of: " + Divisors(*m.num_moe_experts, 1, 256)}};
}

// MCore parallel_state.initialize_model_parallel: the expert grid ETP*EP*PP must divide the
// world; expert data parallel = world / (ETP*EP*PP).
Violations ExpertLayout(const Job& job) {
  // A dense model's expert grid is TP*PP, which layout.world-size already covers.
  if (!SizesValid(job) || !job.model.num_moe_experts) return {};
  const auto& m = job.model;
  const std::int64_t etp = ExpertTensorParallelSize(job);
  const std::int64_t grid = etp * m.expert_model_parallel_size * m.pipeline_model_parallel_size;
  const std::int64_t world = EffectiveWorldSize(job);
  if (world % grid == 0) return {};
  return {Violation{
      {{"memtune.world_size", Str(world)},
       {kEp, Str(m.expert_model_parallel_size)},
       {"model.expert_tensor_parallel_size", Str(etp)},
       {"model.pipeline_model_parallel_size", Str(m.pipeline_model_parallel_size)}},
      "world_size (" + Str(world) +
          ") is not divisible by expert_tensor_model_pipeline_parallel size "
          "(ETP*EP*PP = " +
          Str(etp) + "*" + Str(m.expert_model_parallel_size) + "*" +
          Str(m.pipeline_model_parallel_size) + " = " + Str(grid) + ")",
      "choose EP*ETP dividing world_size/PP = " + (world % m.pipeline_model_parallel_size == 0
                                                       ? Str(world / m.pipeline_model_parallel_size)
                                                       : std::string("(not an integer)"))}};
}

Violations FfnWithoutExperts(const Job& job) {
  const auto& m = job.model;
  if (m.num_moe_experts || !m.moe_ffn_hidden_size) return {};
  const bool mixed =
      m.moe_layer_freq_is_list
          ? std::find(m.moe_layer_freq.begin(), m.moe_layer_freq.end(), 0) != m.moe_layer_freq.end()
          : (!m.moe_layer_freq.empty() && m.moe_layer_freq[0] > 1);
  if (mixed) return {};
  return {Violation{{{"model.moe_ffn_hidden_size", Opt(m.moe_ffn_hidden_size)}, {kExperts, "null"}},
                    "moe_ffn_hidden_size is set but num_moe_experts is None. Please set "
                    "num_moe_experts or remove moe_ffn_hidden_size",
                    "set num_moe_experts, or moe_ffn_hidden_size: null"}};
}

Violations SharedExpertSize(const Job& job) {
  const auto& m = job.model;
  if (!m.moe_shared_expert_intermediate_size || *m.moe_shared_expert_intermediate_size > 0) {
    return {};
  }
  return {One("model.moe_shared_expert_intermediate_size",
              Str(*m.moe_shared_expert_intermediate_size),
              "moe_shared_expert_intermediate_size must be num_shared_experts * "
              "ffn_size_of_each_shared_expert, but got " +
                  Str(*m.moe_shared_expert_intermediate_size),
              "set moe_shared_expert_intermediate_size to a positive size, or null")};
}

Violations SharedExpertOverlapDispatcher(const Job& job) {
  const auto& m = job.model;
  if (!m.moe_shared_expert_intermediate_size || !m.moe_shared_expert_overlap) return {};
  if (m.moe_token_dispatcher_type == MoeTokenDispatcher::kAlltoall ||
      m.moe_token_dispatcher_type == MoeTokenDispatcher::kFlex) {
    return {};
  }
  return {Violation{{{"model.moe_shared_expert_overlap", "true"},
                     {"model.moe_token_dispatcher_type", NameOf(m.moe_token_dispatcher_type)}},
                    "moe_shared_expert_overlap only works with alltoall or flex token dispatcher",
                    "set moe_token_dispatcher_type: alltoall (or flex), or "
                    "moe_shared_expert_overlap: false"}};
}

Violations BiasNeedsEtp1(const Job& job) {
  const auto& m = job.model;
  if (!m.num_moe_experts || !m.add_bias_linear || ExpertTensorParallelSize(job) == 1) return {};
  return {Violation{{{kExperts, Str(*m.num_moe_experts)},
                     {"model.add_bias_linear", "true"},
                     {"model.expert_tensor_parallel_size", Str(ExpertTensorParallelSize(job))}},
                    "Bias in Moe is only supported when ETP==1",
                    "set expert_tensor_parallel_size: 1"}};
}

// MCore gpt_layer_specs.py get_gpt_decoder_block_spec (moe_layer_freq pattern).
Violations LayerFreq(const Job& job) {
  const auto& m = job.model;
  if (!m.num_moe_experts) return {};
  if (m.moe_layer_freq_is_list) {
    if (static_cast<std::int64_t>(m.moe_layer_freq.size()) == m.num_layers) return {};
    return {
        Violation{{{"model.moe_layer_freq",
                    "(list of " + Str(static_cast<std::int64_t>(m.moe_layer_freq.size())) + ")"},
                   {"model.num_layers", Str(m.num_layers)}},
                  "Invalid length of moe_layer_pattern: " +
                      Str(static_cast<std::int64_t>(m.moe_layer_freq.size())) + ", expected " +
                      Str(m.num_layers),
                  "give one 0/1 entry per layer"}};
  }
  if (!m.moe_layer_freq.empty() && m.moe_layer_freq[0] >= 1) return {};
  return {One("model.moe_layer_freq", m.moe_layer_freq.empty() ? "[]" : Str(m.moe_layer_freq[0]),
              "moe_layer_freq must be >= 1 (one MoE layer every k layers)",
              "set moe_layer_freq: 1 for an all-MoE model")};
}

// MCore TransformerConfig.__post_init__, overlap_moe_expert_parallel_comm block.
Violations EpOverlap(const Job& job) {
  const auto& m = job.model;
  if (!m.overlap_moe_expert_parallel_comm) return {};
  Violations out;
  auto add = [&](Fields fields, std::string message, std::string fix) {
    fields.insert(fields.begin(), {kOverlap, "true"});
    out.push_back(Violation{std::move(fields), std::move(message), std::move(fix)});
  };
  if (m.pipeline_model_parallel_size > 1 && !m.virtual_pipeline_model_parallel_size) {
    add({{"model.pipeline_model_parallel_size", Str(m.pipeline_model_parallel_size)},
         {"model.virtual_pipeline_model_parallel_size", "null"}},
        "If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be specified "
        "when pipeline_model_parallel_size > 1",
        "set virtual_pipeline_model_parallel_size");
  }
  if (m.expert_model_parallel_size <= 1) {
    add({{kEp, Str(m.expert_model_parallel_size)}},
        "overlap_moe_expert_parallel_comm is only supported with expert model parallelism",
        "set expert_model_parallel_size > 1, or overlap_moe_expert_parallel_comm: false");
  }
  if (m.moe_token_dispatcher_type != MoeTokenDispatcher::kAlltoall &&
      m.moe_token_dispatcher_type != MoeTokenDispatcher::kFlex) {
    add({{"model.moe_token_dispatcher_type", NameOf(m.moe_token_dispatcher_type)}},
        "overlap_moe_expert_parallel_comm is supported with alltoall/flex token dispatcher",
        "set moe_token_dispatcher_type: alltoall (or flex)");
  }
  const bool full = m.recompute_granularity == RecomputeGranularity::kFull;
  const bool selective_moe = m.recompute_granularity == RecomputeGranularity::kSelective &&
                             Contains(m.recompute_modules, "moe");
  if (full || m.recompute_method != RecomputeMethod::kNone || m.recompute_num_layers ||
      selective_moe) {
    add({{"model.recompute_granularity", full            ? "full"
                                         : selective_moe ? "selective"
                                                         : "null"},
         {"model.recompute_num_layers", Opt(m.recompute_num_layers)},
         {"model.recompute_modules", List(m.recompute_modules)}},
        "disable full recomputation, recompute_method, recompute_num_layers and moe in "
        "recompute_modules when enabling overlap_moe_expert_parallel_comm",
        "use selective recompute without \"moe\", or turn the overlap off");
  }
  if (!m.bf16 && !m.fp16) {
    add({{"model.bf16", "false"}, {"model.fp16", "false"}},
        "overlap_moe_expert_parallel_comm is only supported with bf16 or fp16 model",
        "use a bf16 mixed_precision preset");
  }
  if (m.moe_shared_expert_overlap) {
    add({{"model.moe_shared_expert_overlap", "true"}},
        "disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm",
        "set moe_shared_expert_overlap: false");
  }
  if (m.mtp_num_layers.value_or(0) > 1) {
    add({{"model.mtp_num_layers", Opt(m.mtp_num_layers)}},
        "MTP supports at most one layer when enabling overlap_moe_expert_parallel_comm",
        "set mtp_num_layers <= 1");
  }
  return out;
}

constexpr Rule kRules[] = {
    {{"moe.topk-experts", Severity::kError, RuleScope::kAll, "moe_router_topk <= num_moe_experts",
      "a top-k no larger than the expert count", "MCore TopKRouter (torch.topk over the experts)"},
     TopkWithinExperts},
    {{"moe.ep-needs-experts", Severity::kError, RuleScope::kAll, "EP > 1 requires num_moe_experts",
      "set num_moe_experts or EP: 1", kMcoreTransformer},
     EpNeedsExperts},
    {{"moe.experts-positive", Severity::kError, RuleScope::kAll, "num_moe_experts > 0 when set",
      "a positive expert count or null", kMcoreTransformer},
     ExpertsPositive},
    {{"moe.experts-divisible-ep", Severity::kError, RuleScope::kAll, "num_moe_experts % EP == 0",
      "choose an EP that divides the expert count", kMlmArgs},
     ExpertsDivisibleByEp},
    {{"moe.expert-layout", Severity::kError, RuleScope::kMegatron,
      "world_size % (ETP*EP*PP) == 0 (expert data parallel size is an integer)",
      "choose EP*ETP dividing world/PP", "MCore parallel_state.initialize_model_parallel"},
     ExpertLayout},
    {{"moe.ffn-without-experts", Severity::kError, RuleScope::kMegatron,
      "moe_ffn_hidden_size needs num_moe_experts (unless moe_layer_freq leaves dense layers)",
      "set num_moe_experts or drop moe_ffn_hidden_size", kMcoreTransformer},
     FfnWithoutExperts},
    {{"moe.shared-expert-size", Severity::kError, RuleScope::kMegatron,
      "moe_shared_expert_intermediate_size > 0 when set", "a positive size or null",
      kMcoreTransformer},
     SharedExpertSize},
    {{"moe.shared-expert-overlap-dispatcher", Severity::kError, RuleScope::kMegatron,
      "moe_shared_expert_overlap needs the alltoall or flex dispatcher",
      "moe_token_dispatcher_type: alltoall", kMcoreTransformer},
     SharedExpertOverlapDispatcher},
    {{"moe.bias-needs-etp1", Severity::kError, RuleScope::kMegatron,
      "MoE with add_bias_linear requires ETP == 1", "expert_tensor_parallel_size: 1",
      kMcoreTransformer},
     BiasNeedsEtp1},
    {{"moe.layer-freq", Severity::kError, RuleScope::kMegatron,
      "moe_layer_freq is >= 1, or a 0/1 list with one entry per layer", "fix moe_layer_freq",
      "MCore gpt_layer_specs.get_gpt_decoder_block_spec"},
     LayerFreq},
    {{"moe.ep-overlap", Severity::kError, RuleScope::kMegatron,
      "overlap_moe_expert_parallel_comm: VPP when PP > 1, EP > 1, alltoall/flex, no full or "
      "moe recompute, bf16/fp16, no shared-expert overlap, MTP <= 1",
      "meet the prerequisite or turn the overlap off", kMcoreTransformer},
     EpOverlap},
};

}  // namespace

std::span<const Rule> MoeRules() { return kRules; }

}  // namespace memtune::model::checks
