// GlobalBatchFlops: Megatron-LM's FLOP count, from the model's parameter tensors.
#include "steptime/flops.h"

#include <string_view>
#include <vector>

#include "memtune/model/parameters.h"

namespace memtune::steptime {
namespace {

// 2 x the multiply-adds one token spends in the linear layers of one transformer layer:
// every linear weight (in_features > 0) except the router, routed experts weighted by
// topk / experts (the experts a token visits).
double LinearFlopsPerToken(const model::ModelConfig& model, bool moe_layer) {
  double flops = 0;
  for (const model::ParamTensor& t : model::TransformerLayerParameters(model, moe_layer)) {
    if (t.in_features == 0 || t.is_bias ||
        std::string_view(t.name).find("router") != std::string_view::npos) {
      continue;
    }
    double elements = static_cast<double>(t.elements);
    if (t.expert && model.num_moe_experts && *model.num_moe_experts > 0) {
      elements *=
          static_cast<double>(model.moe_router_topk) / static_cast<double>(*model.num_moe_experts);
    } else {
      elements *= static_cast<double>(t.count);
    }
    flops += 2 * elements;
  }
  return flops;
}

// Attention scores and attention x V of one token over a sequence of `seq` tokens, forward,
// without the causal halving: 2 matmuls x 2 FLOPs x heads x head dims.
double AttentionFlopsPerToken(const model::ModelConfig& model, double seq) {
  const double heads = static_cast<double>(model.num_attention_heads);
  if (model.multi_latent_attention) {
    const double qk = static_cast<double>(model.qk_head_dim + model.qk_pos_emb_head_dim);
    return 2 * seq * heads * (qk + static_cast<double>(model.v_head_dim));
  }
  return 4 * seq * heads * static_cast<double>(model.kv_channels);
}

}  // namespace

ModelFlops GlobalBatchFlops(const model::Job& job) {
  const model::ModelConfig& m = job.model;
  const double seq = static_cast<double>(m.seq_length);
  const double tokens = static_cast<double>(job.train.global_batch_size) * seq;
  const std::vector<bool> moe = model::MoeLayerPattern(m);
  const int mtp = static_cast<int>(m.mtp_num_layers.value_or(0));
  double linear = 0;
  for (int i = 0; i < static_cast<int>(m.num_layers) + mtp; ++i) {
    const bool is_moe = i < static_cast<int>(moe.size()) ? moe[i] : (!moe.empty() && moe.back());
    linear += LinearFlopsPerToken(m, is_moe);
  }
  const double output = 2 * static_cast<double>(m.hidden_size) *
                        static_cast<double>(model::PaddedVocabSize(job)) * (1 + mtp);
  const double attention =
      AttentionFlopsPerToken(m, seq) * (static_cast<double>(m.num_layers) + mtp);
  ModelFlops out;
  // x3: forward, data gradient, weight gradient.
  out.noncausal = 3 * tokens * (linear + output + attention);
  out.causal = 3 * tokens * (linear + output + attention / 2);
  return out;
}

}  // namespace memtune::steptime
