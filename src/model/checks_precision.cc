// Precision rules: fp16/bf16/fp8/fp4 combinations, bf16 first/last layers, cross-entropy
// fusion, and the optimizer's reduced-precision state (precision-aware optimizer).
#include "model/checks_internal.h"

namespace memtune::model::checks {
namespace {

Violations Fp16AndBf16(const Job& job) {
  const auto& m = job.model;
  if (!m.fp16 || !m.bf16) return {};
  return {Violation{{{"model.fp16", "true"}, {"model.bf16", "true"}},
                    "Only one of fp16: True and bf16: True should be True",
                    "use one mixed_precision preset (bf16_mixed or fp16_mixed)"}};
}

Violations Fp8DelayedFirstLast(const Job& job) {
  const auto& m = job.model;
  if (m.fp8 == Fp8Format::kNone || !m.first_last_layers_bf16 || m.fp8_recipe != Fp8Recipe::kDelayed)
    return {};
  return {Violation{{{"model.fp8_recipe", "delayed"}, {"model.first_last_layers_bf16", "true"}},
                    "Delayed scaling does not support first / last layer in BF16",
                    "set first_last_layers_bf16: false, or fp8_recipe: tensorwise"}};
}

Violations Bf16LayersRange(const Job& job) {
  const auto& m = job.model;
  if (m.fp8 == Fp8Format::kNone || !m.first_last_layers_bf16 || m.pipeline_model_parallel_size < 1)
    return {};
  const std::int64_t max_layers = m.num_layers / m.pipeline_model_parallel_size;
  Violations out;
  auto check = [&](const char* name, int value) {
    if (value >= 0 && value <= max_layers) return;
    out.push_back(One(std::string("model.") + name, Str(value),
                      std::string(name) + " (" + Str(value) +
                          ") must be between 0 and number of layers per pipeline stage (" +
                          Str(max_layers) + ")",
                      std::string("set ") + name + " between 0 and " + Str(max_layers)));
  };
  check("num_layers_at_start_in_bf16", m.num_layers_at_start_in_bf16);
  check("num_layers_at_end_in_bf16", m.num_layers_at_end_in_bf16);
  return out;
}

Violations Fp8ParamNeedsFp8(const Job& job) {
  const auto& m = job.model;
  if (!m.fp8_param || m.fp8 != Fp8Format::kNone) return {};
  return {Violation{{{"model.fp8_param", "true"}, {"model.fp8", "null"}},
                    "fp8_param must be used together with fp8 mode",
                    "set fp8 (e.g. hybrid), or fp8_param: false"}};
}

Violations Fp4ParamNeedsFp4(const Job& job) {
  const auto& m = job.model;
  if (!m.fp4_param || m.fp4 != Fp4Format::kNone) return {};
  return {Violation{{{"model.fp4_param", "true"}, {"model.fp4", "null"}},
                    "fp4_param must be used together with fp4 mode",
                    "set fp4: e2m1, or fp4_param: false"}};
}

Violations Fp4AndFp8(const Job& job) {
  const auto& m = job.model;
  if (m.fp4 == Fp4Format::kNone || m.fp8 == Fp8Format::kNone) return {};
  return {Violation{{{"model.fp4", NameOf(m.fp4)}, {"model.fp8", NameOf(m.fp8)}},
                    "fp4 and fp8 cannot be used simultaneously. Please choose one",
                    "set fp4: null or fp8: null"}};
}

Violations CrossEntropyTe(const Job& job) {
  const auto& m = job.model;
  if (!m.cross_entropy_loss_fusion || m.cross_entropy_fusion_impl != CrossEntropyFusionImpl::kTe)
    return {};
  return {Violation{
      {{"model.cross_entropy_loss_fusion", "true"}, {"model.cross_entropy_fusion_impl", "te"}},
      "Transformer Engine cross entropy loss fusion has known stability issues. "
      "Megatron-LM training args validation rejects this combination by default",
      "use cross_entropy_fusion_impl: native, or disable cross_entropy_loss_fusion"}};
}

Violations PrecisionAwareAdam(const Job& job) {
  const auto& o = job.optimizer;
  if (!o.use_precision_aware_optimizer || o.optimizer == Optimizer::kAdam) return {};
  return {Violation{{{"optimizer.use_precision_aware_optimizer", "true"},
                     {"optimizer.optimizer", NameOf(o.optimizer)}},
                    "--use-precision-aware-optimizer only supported with adam",
                    "set optimizer: adam, or use_precision_aware_optimizer: false"}};
}

// MCore OptimizerConfig.__post_init__: reduced-precision optimizer state needs the
// precision-aware optimizer (TE FusedAdam).
Violations StateDtypes(const Job& job) {
  const auto& o = job.optimizer;
  if (o.use_precision_aware_optimizer) return {};
  Violations out;
  auto check = [&](const char* name, Dtype dtype) {
    if (dtype == Dtype::kFp32) return;
    out.push_back(
        Violation{{{std::string("optimizer.") + name, DtypeName(dtype)},
                   {"optimizer.use_precision_aware_optimizer", "false"}},
                  std::string(name) + " can only be fp32 when not using precision-aware optimizer",
                  std::string("set ") + name + ": fp32, or use_precision_aware_optimizer: true"});
  };
  check("main_grads_dtype", o.main_grads_dtype);
  check("main_params_dtype", o.main_params_dtype);
  check("exp_avg_dtype", o.exp_avg_dtype);
  check("exp_avg_sq_dtype", o.exp_avg_sq_dtype);
  return out;
}

// Megatron-LM arguments.py, "Optimizer CPU offload check".
Violations CpuOffloadPrerequisites(const Job& job) {
  const auto& o = job.optimizer;
  const auto& m = job.model;
  if (!o.optimizer_cpu_offload) return {};
  Violations out;
  if (!o.use_precision_aware_optimizer) {
    out.push_back(Violation{{{"optimizer.optimizer_cpu_offload", "true"},
                             {"optimizer.use_precision_aware_optimizer", "false"}},
                            "The optimizer cpu offload must be used in conjunction with "
                            "`--use-precision-aware-optimizer`, as the hybrid device optimizer "
                            "reuses the code path of this flag",
                            "set use_precision_aware_optimizer: true"});
  }
  if (m.fp8_param_gather && m.fp8_recipe != Fp8Recipe::kDelayed) {
    out.push_back(Violation{
        {{"optimizer.optimizer_cpu_offload", "true"},
         {"model.fp8_param_gather", "true"},
         {"model.fp8_recipe", m.fp8_recipe == Fp8Recipe::kNone ? "null" : NameOf(m.fp8_recipe)}},
        "When `--fp8-param-gather` is enabled, the optimizer cpu offload "
        "must be used in conjunction with `--fp8-recipe delayed`",
        "use fp8_recipe: delayed, or fp8_param_gather: false"});
  }
  if (o.optimizer_offload_fraction < 0 || o.optimizer_offload_fraction > 1) {
    out.push_back(One("optimizer.optimizer_offload_fraction", Dec(o.optimizer_offload_fraction),
                      "optimizer_offload_fraction must be in [0, 1]",
                      "set optimizer_offload_fraction between 0 and 1"));
  }
  return out;
}

constexpr Rule kRules[] = {
    {{"precision.fp16-bf16", Severity::kError, RuleScope::kMegatron, "fp16 and bf16 are exclusive",
      "one preset", kMcoreTransformer},
     Fp16AndBf16},
    {{"precision.fp8-delayed-first-last", Severity::kError, RuleScope::kMegatron,
      "first_last_layers_bf16 is not allowed with the delayed fp8 recipe",
      "first_last_layers_bf16: false", kMcoreTransformer},
     Fp8DelayedFirstLast},
    {{"precision.bf16-layers-range", Severity::kError, RuleScope::kMegatron,
      "num_layers_at_start/end_in_bf16 in [0, num_layers/PP]", "lower the counts",
      kMcoreTransformer},
     Bf16LayersRange},
    {{"precision.fp8-param", Severity::kError, RuleScope::kMegatron, "fp8_param requires fp8",
      "set fp8 or fp8_param: false", kMcoreTransformer},
     Fp8ParamNeedsFp8},
    {{"precision.fp4-param", Severity::kError, RuleScope::kMegatron, "fp4_param requires fp4",
      "set fp4 or fp4_param: false", kMcoreTransformer},
     Fp4ParamNeedsFp4},
    {{"precision.fp4-fp8", Severity::kError, RuleScope::kMegatron, "fp4 and fp8 are exclusive",
      "choose one", kMcoreTransformer},
     Fp4AndFp8},
    {{"precision.ce-fusion-te", Severity::kWarning, RuleScope::kMegatron,
      "TE cross-entropy fusion has known stability issues (MLM rejects it by default)",
      "cross_entropy_fusion_impl: native", kMcoreParallel},
     CrossEntropyTe},
    {{"optimizer.precision-aware-adam", Severity::kError, RuleScope::kMegatron,
      "use_precision_aware_optimizer requires adam", "optimizer: adam",
      "MCore OptimizerConfig.__post_init__"},
     PrecisionAwareAdam},
    {{"optimizer.state-dtypes", Severity::kError, RuleScope::kMegatron,
      "non-fp32 main grads/params/Adam moments require use_precision_aware_optimizer",
      "use_precision_aware_optimizer: true, or fp32", "MCore OptimizerConfig.__post_init__"},
     StateDtypes},
    {{"optimizer.cpu-offload", Severity::kError, RuleScope::kMegatron,
      "optimizer_cpu_offload requires the precision-aware optimizer (and delayed fp8 with "
      "fp8_param_gather); offload fraction in [0, 1]",
      "use_precision_aware_optimizer: true", kMlmArgs},
     CpuOffloadPrerequisites},
};

}  // namespace

std::span<const Rule> PrecisionRules() { return kRules; }

}  // namespace memtune::model::checks
