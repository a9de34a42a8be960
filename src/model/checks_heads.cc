// Attention-head and vocabulary rules: what tensor parallelism must divide.
#include "memtune/model/parameters.h"
#include "model/checks_internal.h"

namespace memtune::model::checks {
namespace {

Violations TpDividesHeads(const Job& job) {
  const auto& m = job.model;
  const int tp = m.tensor_model_parallel_size;
  if (tp < 1 || m.num_attention_heads < 1 || m.num_attention_heads % tp == 0) return {};
  return {Violation{
      {{"model.num_attention_heads", Str(m.num_attention_heads)},
       {"model.tensor_model_parallel_size", Str(tp)}},
      "num_attention_heads (" + Str(m.num_attention_heads) +
          ") must be a multiple of tensor_model_parallel_size (" + Str(tp) + ")",
      "set tensor_model_parallel_size to one of: " + Divisors(m.num_attention_heads, 1, 64)}};
}

Violations QueryGroupsVsTp(const Job& job) {
  const auto& m = job.model;
  const int tp = m.tensor_model_parallel_size;
  const std::int64_t g = m.num_query_groups;
  if (tp < 1 || g < 1 || m.multi_latent_attention) return {};
  if (g % tp == 0 || tp % g == 0) return {};
  return {Violation{
      {{"model.num_query_groups", Str(g)}, {"model.tensor_model_parallel_size", Str(tp)}},
      "num_query_groups (" + Str(g) +
          ") must be a multiple or divisor of tensor_model_parallel_size (" + Str(tp) + ")",
      "set tensor_model_parallel_size to a divisor or a multiple of " + Str(g) + " (e.g. " +
          Divisors(g, 1, 64) + ", " + Str(2 * g) + ")"}};
}

// MCore Attention.__init__: divide(num_attention_heads, num_query_groups) when the groups
// do not fill the TP ranks; every GQA layout needs it.
Violations GroupsDivideHeads(const Job& job) {
  const auto& m = job.model;
  const std::int64_t g = m.num_query_groups;
  if (g < 1 || m.num_attention_heads < 1 || m.multi_latent_attention) return {};
  if (m.num_attention_heads % g == 0) return {};
  return {Violation{{{"model.num_attention_heads", Str(m.num_attention_heads)},
                     {"model.num_query_groups", Str(g)}},
                    Str(m.num_attention_heads) + " is not divisible by " + Str(g) +
                        " (num_attention_heads by num_query_groups)",
                    "set num_query_groups to a divisor of num_attention_heads: " +
                        Divisors(m.num_attention_heads, 1, m.num_attention_heads)}};
}

// MCore tensor_parallel/utils.py VocabUtility.vocab_range_from_global_vocab_size:
// divide(vocab, TP). With should_pad_vocab the padded size is always divisible.
Violations TpDividesVocab(const Job& job) {
  const auto& m = job.model;
  const int tp = m.tensor_model_parallel_size;
  if (tp < 1 || m.vocab_size < 1) return {};
  const std::int64_t vocab = PaddedVocabSize(job);
  if (vocab % tp == 0) return {};
  return {Violation{{{"model.vocab_size", Str(m.vocab_size)},
                     {"model.should_pad_vocab", Bool(m.should_pad_vocab)},
                     {"model.tensor_model_parallel_size", Str(tp)}},
                    Str(vocab) + " is not divisible by " + Str(tp) +
                        " (vocabulary size by tensor_model_parallel_size)",
                    "set should_pad_vocab: true (pads to a multiple of "
                    "make_vocab_size_divisible_by*TP), or a TP that divides " +
                        Str(vocab)}};
}

// The dense MLP's fc2 (RowParallelLinear) and fc1 (ColumnParallelLinear) split the FFN
// width across TP ranks with divide(), which asserts divisibility.
Violations TpDividesFfn(const Job& job) {
  const auto& m = job.model;
  const int tp = m.tensor_model_parallel_size;
  const std::int64_t ffn = EffectiveFfnHiddenSize(m);
  if (tp <= 1 || m.num_moe_experts || ffn <= 0 || ffn % tp == 0) return {};
  return {Violation{
      {{"model.ffn_hidden_size", Str(ffn)}, {"model.tensor_model_parallel_size", Str(tp)}},
      Str(ffn) + " is not divisible by " + Str(tp) +
          " (the MLP's ffn_hidden_size split across TP ranks)",
      "choose a TP that divides ffn_hidden_size"}};
}

constexpr Rule kRules[] = {
    {{"heads.tp-divides-ffn", Severity::kError, RuleScope::kMegatron, "ffn_hidden_size % TP == 0",
      "choose a TP that divides the FFN width",
      "MCore tensor_parallel/layers.py RowParallelLinear (divide)"},
     TpDividesFfn},
    {{"heads.tp-divides-heads", Severity::kError, RuleScope::kAll, "num_attention_heads % TP == 0",
      "choose a TP that divides the head count", kMcoreTransformer},
     TpDividesHeads},
    {{"heads.query-groups-tp", Severity::kError, RuleScope::kAll,
      "num_query_groups is a multiple or a divisor of TP",
      "choose a TP that divides or is divided by the KV-head count", kMcoreTransformer},
     QueryGroupsVsTp},
    {{"heads.groups-divide-heads", Severity::kError, RuleScope::kAll,
      "num_attention_heads % num_query_groups == 0",
      "set num_query_groups to a divisor of the head count", "MCore Attention.__init__"},
     GroupsDivideHeads},
    {{"vocab.tp-divides-vocab", Severity::kError, RuleScope::kMegatron,
      "the (padded) vocabulary size is divisible by TP",
      "should_pad_vocab: true, or a TP that divides vocab_size",
      "MCore VocabUtility.vocab_range_from_global_vocab_size"},
     TpDividesVocab},
};

}  // namespace

std::span<const Rule> HeadsRules() { return kRules; }

}  // namespace memtune::model::checks
