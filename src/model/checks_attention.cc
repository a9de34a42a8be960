// Core-attention implementation rules: which attention backends work together with the
// layer spec and context parallelism, and what unfused attention costs.
#include <algorithm>

#include "memtune/core/units.h"
#include "memtune/model/parameters.h"
#include "model/checks_internal.h"

namespace memtune::model::checks {
namespace {

constexpr const char* kBackend = "model.attention_backend";
constexpr const char* kImpl = "model.transformer_impl";
constexpr std::int64_t kUnfusedScoresWarnBytes = 256 * kMiB;  // per layer and micro-batch

// Megatron-LM arguments.py: "--attention-backend local is only supported with --spec local".
Violations LocalNeedsLocalSpec(const Job& job) {
  const auto& m = job.model;
  if (m.attention_backend != AttentionBackend::kLocal ||
      m.transformer_impl == TransformerImpl::kLocal)
    return {};
  return {Violation{{{kBackend, "local"}, {kImpl, NameOf(m.transformer_impl)}},
                    "attention_backend local is only supported with the local layer spec",
                    "set transformer_impl: local, or attention_backend: auto"}};
}

// TE dot_product_attention/utils.py get_attention_backend: context parallelism runs only on
// FlashAttention or cuDNN fused attention; MCore's local attention has no CP at all.
Violations UnfusedWithCp(const Job& job) {
  const auto& m = job.model;
  if (m.context_parallel_size <= 1 || CoreAttentionOf(m) == CoreAttention::kFused) return {};
  return {Violation{{{kBackend, NameOf(m.attention_backend)},
                     {kImpl, NameOf(m.transformer_impl)},
                     {"model.context_parallel_size", Str(m.context_parallel_size)}},
                    "context parallelism needs flash or fused attention; unfused and local "
                    "attention have no context-parallel path",
                    "set attention_backend: auto (or flash / fused) on the transformer_engine "
                    "spec, or context_parallel_size: 1"}};
}

// What the unfused softmax keeps per layer and micro-batch (docs/estimator.md §4), as a
// warning: at long sequences it dwarfs every other activation.
Violations UnfusedScores(const Job& job) {
  const auto& m = job.model;
  if (CoreAttentionOf(m) == CoreAttention::kFused || m.seq_length <= 0) return {};
  const int tp = std::max(1, m.tensor_model_parallel_size);
  const std::int64_t heads = std::max<std::int64_t>(1, m.num_attention_heads / tp);
  const double act = m.bf16 || m.fp16 ? 2.0 : 4.0;
  const double bytes = act * static_cast<double>(job.train.micro_batch_size) * heads *
                       static_cast<double>(m.seq_length) * static_cast<double>(m.seq_length);
  if (bytes < static_cast<double>(kUnfusedScoresWarnBytes)) return {};
  return {Violation{{{kBackend, NameOf(m.attention_backend)},
                     {kImpl, NameOf(m.transformer_impl)},
                     {"model.seq_length", Str(m.seq_length)}},
                    "unfused attention keeps a [b, heads, s, s] softmax per layer and "
                    "micro-batch: " +
                        FormatBytesBinary(static_cast<std::int64_t>(bytes)) + " each at this shape",
                    "use flash or fused attention (attention_backend: auto on the "
                    "transformer_engine spec), or recompute core_attn"}};
}

constexpr Rule kRules[] = {
    {{"attention.local-needs-local-spec", Severity::kError, RuleScope::kMegatron,
      "attention_backend local requires transformer_impl local",
      "set transformer_impl: local or another attention_backend", "Megatron-LM arguments.py"},
     LocalNeedsLocalSpec},
    {{"attention.unfused-cp", Severity::kError, RuleScope::kMegatron,
      "context parallelism requires flash or fused attention",
      "attention_backend: auto/flash/fused, or context_parallel_size: 1",
      "TE get_attention_backend"},
     UnfusedWithCp},
    {{"attention.unfused-scores", Severity::kWarning, RuleScope::kMegatron,
      "unfused attention keeps its s x s softmax (warned above 256 MiB per layer and micro-batch)",
      "use flash or fused attention, or recompute core_attn",
      "TE UnfusedDotProductAttention, MCore DotProductAttention"},
     UnfusedScores},
};

}  // namespace

std::span<const Rule> AttentionRules() { return kRules; }

}  // namespace memtune::model::checks
