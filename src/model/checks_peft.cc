// LoRA rules: sequence_parallel_input_regather eligibility (Bridge peft/lora.py
// _sequence_parallel_input_regather_eligibility; megatron.md section 6).
#include "model/checks_internal.h"

namespace memtune::model::checks {
namespace {

constexpr const char* kRegather = "peft.sequence_parallel_input_regather";

bool AllMoeLayers(const ModelConfig& m) {
  if (!m.num_moe_experts) return false;
  if (m.moe_layer_freq_is_list) {
    for (int flag : m.moe_layer_freq) {
      if (flag == 0) return false;
    }
    return true;
  }
  return m.moe_layer_freq.empty() || m.moe_layer_freq[0] == 1;
}

// Reasons that disable the regather path for every adapter (eligibility steps 3, 6, 7, 11,
// 13, 14 of the Bridge check).
std::vector<std::string> GlobalReasons(const Job& job) {
  const auto& m = job.model;
  std::vector<std::string> reasons;
  if (!m.sequence_parallel) reasons.push_back("sequence_parallel is false");
  if (m.tensor_model_parallel_size <= 1) reasons.push_back("tensor_model_parallel_size is 1");
  if (m.recompute_granularity == RecomputeGranularity::kFull) {
    reasons.push_back("full recompute checkpoints the adapters");
  }
  if (m.cuda_graph_impl != CudaGraphImpl::kNone)
    reasons.push_back(std::string("cuda_graph_impl is ") + NameOf(m.cuda_graph_impl));
  if (m.cpu_offloading && m.cpu_offloading_activations) {
    reasons.push_back("CPU activation offloading is on");
  }
  return reasons;
}

// Targeted column-parallel non-expert linears that can regather (steps 8, 12, 15), and the
// notes on targets that fall back.
std::vector<std::string> EligibleTargets(const Job& job, std::vector<std::string>& notes) {
  const auto& m = job.model;
  const auto& targets = job.peft->target_modules;
  std::vector<std::string> eligible;
  if (Contains(targets, "linear_qkv")) eligible.push_back("linear_qkv");
  if (Contains(targets, "linear_fc1")) {
    if (m.recompute_granularity == RecomputeGranularity::kSelective &&
        Contains(m.recompute_modules, "mlp")) {
      notes.push_back("linear_fc1 falls back: selective recompute of mlp checkpoints it");
    } else if (AllMoeLayers(m)) {
      notes.push_back(
          "linear_fc1 falls back: every layer is MoE and expert adapters never "
          "regather");
    } else {
      eligible.push_back("linear_fc1");
    }
  }
  return eligible;
}

bool IsLora(const Job& job) { return job.peft && job.peft->method == PeftMethod::kLora; }

Violations RegatherIneligible(const Job& job) {
  if (!IsLora(job) || !job.peft->sequence_parallel_input_regather) return {};
  const auto& m = job.model;
  std::vector<std::string> reasons = GlobalReasons(job);
  std::vector<std::string> notes;
  const std::vector<std::string> eligible = EligibleTargets(job, notes);
  const Fields fields = {{kRegather, "true"},
                         {"peft.target_modules", List(job.peft->target_modules)},
                         {"model.sequence_parallel", Bool(m.sequence_parallel)},
                         {"model.tensor_model_parallel_size", Str(m.tensor_model_parallel_size)}};
  if (!reasons.empty() || eligible.empty()) {
    if (eligible.empty()) reasons.push_back("no targeted linear_qkv / linear_fc1 can regather");
    for (const std::string& n : notes) reasons.push_back(n);
    std::string text;
    for (const std::string& r : reasons) text += (text.empty() ? "" : "; ") + r;
    return {Violation{fields, "sequence_parallel_input_regather has no effect: " + text,
                      "remove the blocker (e.g. sequence_parallel: true with TP > 1, no CUDA "
                      "graphs, no full recompute) or set sequence_parallel_input_regather: false"}};
  }
  if (notes.empty()) return {};
  return {Violation{
      fields,
      "sequence_parallel_input_regather applies only to " + List(eligible) + ": " + notes.front(),
      "accept it, or drop mlp from recompute_modules so linear_fc1 regathers too"}};
}

Violations RegatherAdvice(const Job& job) {
  if (!IsLora(job) || job.peft->sequence_parallel_input_regather) return {};
  const auto& m = job.model;
  if (!GlobalReasons(job).empty()) return {};
  std::vector<std::string> notes;
  const std::vector<std::string> eligible = EligibleTargets(job, notes);
  if (eligible.empty()) return {};
  return {Violation{{{kRegather, "false"},
                     {"peft.target_modules", List(job.peft->target_modules)},
                     {"model.sequence_parallel", "true"},
                     {"model.tensor_model_parallel_size", Str(m.tensor_model_parallel_size)}},
                    "LoRA with sequence parallelism saves the all-gathered input of each LoRA-A "
                    "on " +
                        List(eligible) +
                        " for backward; regathering keeps only the "
                        "1/TP sequence shard and re-gathers it before wgrad",
                    "set peft.sequence_parallel_input_regather: true"}};
}

// peft/utils.py get_effective_lora_dim raises a ValueError when the rank does not divide.
Violations MoeLoraRank(const Job& job) {
  if (!job.peft || !job.peft->normalize_moe_lora || !job.model.num_moe_experts) return {};
  const std::int64_t topk = job.model.moe_router_topk, dim = job.peft->dim;
  if (topk > 0 && dim % topk == 0) return {};
  return {Violation{{{"peft.normalize_moe_lora", "true"},
                     {"peft.dim", Str(dim)},
                     {"model.moe_router_topk", Str(topk)}},
                    "LoRA dim=" + Str(dim) + " must be divisible by moe_router_topk=" + Str(topk) +
                        " when normalize_moe_lora is enabled",
                    "set peft.dim to a multiple of moe_router_topk, or normalize_moe_lora: false"}};
}

constexpr Rule kRules[] = {
    {{"peft.regather-ineligible", Severity::kWarning, RuleScope::kMegatron,
      "sequence_parallel_input_regather set where it has no effect (SP off, TP 1, full "
      "recompute, CUDA graphs, CPU activation offload, no linear_qkv/linear_fc1 target)",
      "remove the blocker or the option",
      "Bridge LoRA _sequence_parallel_input_regather_eligibility"},
     RegatherIneligible},
    {{"peft.regather-advice", Severity::kWarning, RuleScope::kMegatron,
      "LoRA + SP + TP > 1 without sequence_parallel_input_regather keeps gathered LoRA-A inputs",
      "peft.sequence_parallel_input_regather: true", kPlaybook},
     RegatherAdvice},
    {{"peft.moe-lora-rank", Severity::kError, RuleScope::kMegatron,
      "normalize_moe_lora needs peft.dim divisible by moe_router_topk",
      "a dim that moe_router_topk divides", "Bridge peft/utils.py get_effective_lora_dim"},
     MoeLoraRank},
};

}  // namespace

std::span<const Rule> PeftRules() { return kRules; }

}  // namespace memtune::model::checks
