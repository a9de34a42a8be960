// The parameter tensors of a Megatron-Core GPTModel built with Transformer Engine layers.
//
// Shapes restate Megatron-LM @ d98e8a64 (megatron/core/models/gpt/gpt_layer_specs.py,
// transformer/attention.py, transformer/mlp.py, transformer/moe/{moe_layer,router,experts,
// shared_experts}.py, transformer/multi_latent_attention.py,
// transformer/multi_token_prediction.py). With TE, the input layernorm is fused into
// linear_qkv and the pre-MLP norm into linear_fc1 (`layer_norm_weight`); they are still
// tensors and are listed under those names.
#include "memtune/model/parameters.h"

#include <utility>

#include "memtune/core/check.h"

namespace memtune::model {
namespace {

// Collects the tensors into a vector (the list-returning functions).
class VectorSink final : public ParamTensorSink {
 public:
  void Add(const ParamTensor& tensor) override { tensors.push_back(tensor); }
  std::vector<ParamTensor> tensors;
};

// Forwards every tensor to `next` with its placement set (final norm, output layer, MTP).
class PlacedSink final : public ParamTensorSink {
 public:
  PlacedSink(ParamTensorSink& next, ParamPlacement placement)
      : next_(next), placement_(placement) {}
  void Add(const ParamTensor& tensor) override {
    ParamTensor placed = tensor;
    placed.placement = placement_;
    next_.Add(placed);
  }

 private:
  ParamTensorSink& next_;
  ParamPlacement placement_;
};

ParamTensor Linear(const char* name, std::int64_t in, std::int64_t out, TpSplit split) {
  ParamTensor t{name, in * out};
  t.tp_split = split;
  t.in_features = in;
  return t;
}

// A lookup table [rows, width] (word and position embeddings): no in_features.
ParamTensor Table(const char* name, std::int64_t rows, std::int64_t width, TpSplit split) {
  ParamTensor t{name, rows * width};
  t.tp_split = split;
  return t;
}

ParamTensor Bias(const char* name, std::int64_t out, TpSplit split) {
  ParamTensor t{name, out};
  t.tp_split = split;
  t.is_bias = true;
  return t;
}

// A norm over `width`: weight, plus bias for LayerNorm (RMSNorm has none).
void AddNorm(ParamTensorSink& out, const ModelConfig& m, std::int64_t width,
             const char* weight_name, const char* bias_name) {
  ParamTensor w{weight_name, width};
  w.is_norm = true;
  out.Add(w);
  if (m.normalization == Normalization::kLayerNorm) {
    ParamTensor b{bias_name, width};
    b.is_norm = true;
    b.is_bias = true;
    out.Add(b);
  }
}

std::int64_t FfnMultiplier(const ModelConfig& m) { return m.gated_linear_unit ? 2 : 1; }

// MCore attention.py SelfAttention: linear_qkv out = (a + 2g) * d, bias iff
// Bridge te_layers.py TERowParallelLinearLayerNorm: a TENorm on the row-parallel output,
// `<linear>.post_layernorm` (Gemma 2 / 3), replicated over TP like every norm.
void AddPostNorm(ParamTensorSink& out, const ModelConfig& m, const char* weight_name,
                 const char* bias_name) {
  if (m.sublayer_post_norms) AddNorm(out, m, m.hidden_size, weight_name, bias_name);
}

// add_bias_linear or add_qkv_bias; q/k layernorm over the head dim.
void AddSelfAttention(ParamTensorSink& out, const ModelConfig& m) {
  const std::int64_t h = m.hidden_size;
  const std::int64_t a = m.num_attention_heads;
  const std::int64_t d = EffectiveKvChannels(m);
  const std::int64_t qkv = (a + 2 * EffectiveQueryGroups(m)) * d;
  AddNorm(out, m, h, "self_attention.linear_qkv.layer_norm_weight",
          "self_attention.linear_qkv.layer_norm_bias");
  out.Add(Linear("self_attention.linear_qkv.weight", h, qkv, TpSplit::kColumn));
  if (m.add_bias_linear || m.add_qkv_bias) {
    out.Add(Bias("self_attention.linear_qkv.bias", qkv, TpSplit::kColumn));
  }
  if (m.qk_layernorm) {
    AddNorm(out, m, d, "self_attention.q_layernorm.weight", "self_attention.q_layernorm.bias");
    AddNorm(out, m, d, "self_attention.k_layernorm.weight", "self_attention.k_layernorm.bias");
  }
}

// MCore multi_latent_attention.py MLASelfAttention: down projections are TELinear with
// parallel_mode "duplicated" (replicated over TP); up projections are column-parallel; the
// q/kv norms (q_lora_rank, kv_lora_rank wide) exist only with qk_layernorm. No biases.
void AddMlaAttention(ParamTensorSink& out, const ModelConfig& m) {
  const std::int64_t h = m.hidden_size;
  const std::int64_t a = m.num_attention_heads;
  const std::int64_t q_head = m.qk_head_dim + m.qk_pos_emb_head_dim;
  AddNorm(out, m, h, "input_layernorm.weight", "input_layernorm.bias");
  if (!m.q_lora_rank.has_value()) {
    out.Add(Linear("self_attention.linear_q_proj.weight", h, a * q_head, TpSplit::kColumn));
  } else {
    const std::int64_t q_lora = *m.q_lora_rank;
    out.Add(Linear("self_attention.linear_q_down_proj.weight", h, q_lora, TpSplit::kReplicated));
    if (m.qk_layernorm) {
      AddNorm(out, m, q_lora, "self_attention.linear_q_up_proj.layer_norm_weight",
              "self_attention.linear_q_up_proj.layer_norm_bias");
    }
    out.Add(Linear("self_attention.linear_q_up_proj.weight", q_lora, a * q_head, TpSplit::kColumn));
  }
  out.Add(Linear("self_attention.linear_kv_down_proj.weight", h,
                 m.kv_lora_rank + m.qk_pos_emb_head_dim, TpSplit::kReplicated));
  if (m.qk_layernorm) {
    AddNorm(out, m, m.kv_lora_rank, "self_attention.linear_kv_up_proj.layer_norm_weight",
            "self_attention.linear_kv_up_proj.layer_norm_bias");
  }
  out.Add(Linear("self_attention.linear_kv_up_proj.weight", m.kv_lora_rank,
                 a * (m.qk_head_dim + m.v_head_dim), TpSplit::kColumn));
}

// linear_proj (row-parallel; its bias is added after the reduce, so replicated) and the
// learnable softmax offsets ("sinks", one per head, split with the heads).
void AddAttentionOutput(ParamTensorSink& out, const ModelConfig& m) {
  const std::int64_t a = m.num_attention_heads;
  const std::int64_t in = m.multi_latent_attention ? a * m.v_head_dim : a * EffectiveKvChannels(m);
  out.Add(Linear("self_attention.linear_proj.weight", in, m.hidden_size, TpSplit::kRow));
  AddPostNorm(out, m, "self_attention.linear_proj.post_layernorm.weight",
              "self_attention.linear_proj.post_layernorm.bias");
  if (m.add_bias_linear) {
    out.Add(Bias("self_attention.linear_proj.bias", m.hidden_size, TpSplit::kReplicated));
  }
  if (m.softmax_type == SoftmaxType::kLearnable) {
    out.Add(ParamTensor{"self_attention.core_attention.softmax_offset", a, 1, TpSplit::kColumn});
  }
}

// MCore mlp.py MLP with TE: fc1 (fused pre-MLP norm) h -> f (x2 gated), fc2 f -> h.
void AddDenseMlp(ParamTensorSink& out, const ModelConfig& m) {
  const std::int64_t h = m.hidden_size;
  const std::int64_t fc1 = EffectiveFfnHiddenSize(m) * FfnMultiplier(m);
  AddNorm(out, m, h, "mlp.linear_fc1.layer_norm_weight", "mlp.linear_fc1.layer_norm_bias");
  out.Add(Linear("mlp.linear_fc1.weight", h, fc1, TpSplit::kColumn));
  if (m.add_bias_linear) out.Add(Bias("mlp.linear_fc1.bias", fc1, TpSplit::kColumn));
  out.Add(Linear("mlp.linear_fc2.weight", EffectiveFfnHiddenSize(m), h, TpSplit::kRow));
  AddPostNorm(out, m, "mlp.linear_fc2.post_layernorm.weight", "mlp.linear_fc2.post_layernorm.bias");
  if (m.add_bias_linear) out.Add(Bias("mlp.linear_fc2.bias", h, TpSplit::kReplicated));
}

// MCore moe/router.py TopKRouter: weight E x h (+ bias E with add_bias_linear); expert_bias
// is a registered fp32 buffer (moe_router_enable_expert_bias).
void AddRouter(ParamTensorSink& out, const ModelConfig& m) {
  const std::int64_t e = *m.num_moe_experts;
  out.Add(Linear("mlp.router.weight", m.hidden_size, e, TpSplit::kReplicated));
  if (m.add_bias_linear) out.Add(Bias("mlp.router.bias", e, TpSplit::kReplicated));
  if (m.moe_router_enable_expert_bias) {
    ParamTensor b = Bias("mlp.router.expert_bias", e, TpSplit::kReplicated);
    b.is_buffer = true;
    out.Add(b);
  }
}

// MCore moe/experts.py TEGroupedMLP (one copy per expert; input and output width is the
// latent size when moe_latent_size is set) and moe_layer.py latent projections
// (TELinear "duplicated": replicated).
void AddRoutedExperts(ParamTensorSink& out, const ModelConfig& m) {
  const std::int64_t e = *m.num_moe_experts;
  const std::int64_t width = m.moe_latent_size.value_or(m.hidden_size);
  const std::int64_t f_e = EffectiveMoeFfnHiddenSize(m);
  const std::int64_t fc1 = f_e * FfnMultiplier(m);
  if (m.moe_latent_size.has_value()) {
    const std::int64_t l = *m.moe_latent_size;
    out.Add(Linear("mlp.fc1_latent_proj.weight", m.hidden_size, l, TpSplit::kReplicated));
    if (m.add_bias_linear) out.Add(Bias("mlp.fc1_latent_proj.bias", l, TpSplit::kReplicated));
    out.Add(Linear("mlp.fc2_latent_proj.weight", l, m.hidden_size, TpSplit::kReplicated));
    if (m.add_bias_linear) {
      out.Add(Bias("mlp.fc2_latent_proj.bias", m.hidden_size, TpSplit::kReplicated));
    }
  }
  auto expert = [&](ParamTensor t) {
    t.count = e;
    t.expert = true;
    out.Add(t);
  };
  expert(Linear("mlp.experts.linear_fc1.weight", width, fc1, TpSplit::kColumn));
  if (m.add_bias_linear) expert(Bias("mlp.experts.linear_fc1.bias", fc1, TpSplit::kColumn));
  expert(Linear("mlp.experts.linear_fc2.weight", f_e, width, TpSplit::kRow));
  if (m.add_bias_linear) expert(Bias("mlp.experts.linear_fc2.bias", width, TpSplit::kReplicated));
}

// MCore moe/shared_experts.py SharedExpertMLP (no biases: it asserts !add_bias_linear) and
// its optional sigmoid gate (1 x h).
void AddSharedExperts(ParamTensorSink& out, const ModelConfig& m) {
  const std::int64_t h = m.hidden_size;
  const std::int64_t f_sh = *m.moe_shared_expert_intermediate_size;
  out.Add(
      Linear("mlp.shared_experts.linear_fc1.weight", h, f_sh * FfnMultiplier(m), TpSplit::kColumn));
  out.Add(Linear("mlp.shared_experts.linear_fc2.weight", f_sh, h, TpSplit::kRow));
  if (m.moe_shared_expert_gate) {
    out.Add(ParamTensor{"mlp.shared_experts.gate_weight", h, 1, TpSplit::kReplicated});
  }
}

void AddMoeMlp(ParamTensorSink& out, const ModelConfig& m) {
  AddNorm(out, m, m.hidden_size, "pre_mlp_layernorm.weight", "pre_mlp_layernorm.bias");
  AddRouter(out, m);
  AddRoutedExperts(out, m);
  if (m.moe_shared_expert_intermediate_size.value_or(0) > 0) AddSharedExperts(out, m);
}

bool HasExperts(const ModelConfig& m) { return m.num_moe_experts.value_or(0) > 0; }

std::int64_t Sum(const std::vector<ParamTensor>& tensors) {
  std::int64_t total = 0;
  for (const ParamTensor& t : tensors) total += t.Total();
  return total;
}

}  // namespace

std::int64_t EffectiveKvChannels(const ModelConfig& m) {
  if (m.kv_channels > 0) return m.kv_channels;
  return m.num_attention_heads > 0 ? m.hidden_size / m.num_attention_heads : 0;
}

std::int64_t EffectiveQueryGroups(const ModelConfig& m) {
  return m.num_query_groups > 0 ? m.num_query_groups : m.num_attention_heads;
}

std::int64_t EffectiveFfnHiddenSize(const ModelConfig& m) {
  return m.ffn_hidden_size > 0 ? m.ffn_hidden_size : 4 * m.hidden_size;
}

std::int64_t EffectiveMoeFfnHiddenSize(const ModelConfig& m) {
  return m.moe_ffn_hidden_size.value_or(EffectiveFfnHiddenSize(m));
}

std::vector<bool> MoeLayerPattern(const ModelConfig& model) {
  const std::int64_t total = model.num_layers + model.mtp_num_layers.value_or(0);
  std::vector<bool> pattern(static_cast<std::size_t>(model.num_layers), false);
  if (HasExperts(model)) {
    for (std::int64_t i = 0; i < model.num_layers; ++i) {
      const auto idx = static_cast<std::size_t>(i);
      if (model.moe_layer_freq_is_list) {
        pattern[idx] = idx < model.moe_layer_freq.size() && model.moe_layer_freq[idx] != 0;
      } else {
        const int freq = model.moe_layer_freq.empty() ? 1 : model.moe_layer_freq.front();
        MEMTUNE_CHECK(freq > 0, "moe_layer_freq must be positive (validated by the parser)");
        pattern[idx] = i % freq == 0;
      }
    }
  }
  const bool last = !pattern.empty() && pattern.back();
  pattern.resize(static_cast<std::size_t>(total), last);
  return pattern;
}

void AddTransformerLayerParameters(const ModelConfig& model, bool moe_layer, ParamTensorSink& out) {
  if (model.multi_latent_attention) {
    AddMlaAttention(out, model);
  } else {
    AddSelfAttention(out, model);
  }
  AddAttentionOutput(out, model);
  if (moe_layer && HasExperts(model)) {
    AddMoeMlp(out, model);
  } else {
    AddDenseMlp(out, model);
  }
}

void AddEmbeddingParameters(const ModelConfig& model, std::int64_t vocab, ParamTensorSink& out) {
  ParamTensor word =
      Table("embedding.word_embeddings.weight", vocab, model.hidden_size, TpSplit::kVocab);
  word.placement = ParamPlacement::kEmbedding;
  out.Add(word);
  if (model.position_embedding_type == PositionEmbedding::kLearnedAbsolute) {
    const std::int64_t positions =
        model.max_position_embeddings > 0 ? model.max_position_embeddings : model.seq_length;
    ParamTensor pos = Table("embedding.position_embeddings.weight", positions, model.hidden_size,
                            TpSplit::kReplicated);
    pos.placement = ParamPlacement::kEmbedding;
    out.Add(pos);
  }
}

void AddOutputParameters(const ModelConfig& model, std::int64_t vocab, ParamTensorSink& out) {
  PlacedSink final_norm(out, ParamPlacement::kFinalNorm);
  AddNorm(final_norm, model, model.hidden_size, "decoder.final_layernorm.weight",
          "decoder.final_layernorm.bias");
  if (!model.share_embeddings_and_output_weights) {
    ParamTensor output = Linear("output_layer.weight", model.hidden_size, vocab, TpSplit::kVocab);
    output.placement = ParamPlacement::kOutput;
    out.Add(output);
  }
}

// MCore multi_token_prediction.py MultiTokenPredictionLayer: enorm, hnorm, eh_proj
// (2h -> h, column-parallel, no bias) and final_layernorm. The embedding and output layer
// are shared with the main model, so they are not repeated here.
void AddMtpExtraParameters(const ModelConfig& model, ParamTensorSink& sink) {
  const std::int64_t h = model.hidden_size;
  PlacedSink out(sink, ParamPlacement::kMtp);
  AddNorm(out, model, h, "mtp.enorm.weight", "mtp.enorm.bias");
  AddNorm(out, model, h, "mtp.hnorm.weight", "mtp.hnorm.bias");
  out.Add(Linear("mtp.eh_proj.weight", 2 * h, h, TpSplit::kColumn));
  AddNorm(out, model, h, "mtp.final_layernorm.weight", "mtp.final_layernorm.bias");
}

std::vector<ParamTensor> TransformerLayerParameters(const ModelConfig& model, bool moe_layer) {
  VectorSink out;
  AddTransformerLayerParameters(model, moe_layer, out);
  return std::move(out.tensors);
}

std::vector<ParamTensor> EmbeddingParameters(const ModelConfig& model, std::int64_t vocab) {
  VectorSink out;
  AddEmbeddingParameters(model, vocab, out);
  return std::move(out.tensors);
}

std::vector<ParamTensor> OutputParameters(const ModelConfig& model, std::int64_t vocab) {
  VectorSink out;
  AddOutputParameters(model, vocab, out);
  return std::move(out.tensors);
}

std::vector<ParamTensor> MtpExtraParameters(const ModelConfig& model) {
  VectorSink out;
  AddMtpExtraParameters(model, out);
  return std::move(out.tensors);
}

std::int64_t CountParameters(const ModelConfig& model, std::int64_t vocab) {
  const std::int64_t dense_layer = Sum(TransformerLayerParameters(model, false));
  const std::int64_t moe_layer =
      HasExperts(model) ? Sum(TransformerLayerParameters(model, true)) : dense_layer;
  std::int64_t total = Sum(EmbeddingParameters(model, vocab)) + Sum(OutputParameters(model, vocab));
  for (bool is_moe : MoeLayerPattern(model)) total += is_moe ? moe_layer : dense_layer;
  total += model.mtp_num_layers.value_or(0) * Sum(MtpExtraParameters(model));
  return total;
}

CoreAttention CoreAttentionOf(const ModelConfig& model) {
  if (model.transformer_impl == TransformerImpl::kLocal ||
      model.attention_backend == AttentionBackend::kLocal) {
    return CoreAttention::kLocal;
  }
  return model.attention_backend == AttentionBackend::kUnfused ? CoreAttention::kTeUnfused
                                                               : CoreAttention::kFused;
}

}  // namespace memtune::model
