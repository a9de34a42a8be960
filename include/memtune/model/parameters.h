// The parameter tensors of a Megatron-Core GPT model, tensor by tensor.
//
// This is the single place that knows which weights a model has: the catalog's exact
// parameter counts and the accurate estimator's per-rank model state both come from it.
// Shapes follow Megatron-Core's GPTModel with Transformer Engine layers (the layout Bridge
// builds from a Hugging Face config), so the total equals the published checkpoint's count.
#pragma once

#include <cstdint>
#include <vector>

#include "memtune/model/job.h"

namespace memtune::model {

// How tensor parallelism shards a tensor.
enum class TpSplit {
  kReplicated,  // every TP rank holds all of it (norms, router, row-parallel biases)
  kColumn,      // split along the output dim (linear_qkv, linear_fc1 and their biases)
  kRow,         // split along the input dim (linear_proj, linear_fc2 weights)
  kVocab,       // split along the vocabulary (word embeddings, output layer)
};

// Where in the pipeline a tensor lives.
enum class ParamPlacement {
  kEmbedding,  // first pipeline stage (word and position embeddings)
  kLayer,      // the stage that builds the transformer layer
  kFinalNorm,  // last stage (final layernorm)
  kOutput,     // last stage (output layer; absent when embeddings are tied and PP == 1)
  kMtp,        // last stage (multi-token-prediction block)
};

// One parameter tensor (or a family of identical ones, see `count`).
struct ParamTensor {
  const char* name;        // static string, e.g. "self_attention.linear_qkv.weight"
  std::int64_t elements;   // elements of ONE tensor, unsharded (global shape product)
  std::int64_t count = 1;  // identical copies (e.g. per-expert weights: num_moe_experts)
  TpSplit tp_split = TpSplit::kReplicated;
  bool expert = false;  // routed-expert weight: sharded over EP, and over ETP instead of TP
  ParamPlacement placement = ParamPlacement::kLayer;
  bool is_norm = false;  // layernorm / RMSNorm weight or bias (replicated over TP)
  bool is_bias = false;
  // A persistent buffer rather than an nn.Parameter (MCore's router `expert_bias`): it is
  // in the checkpoint and in memory (fp32), but gets no gradient and no optimizer state.
  bool is_buffer = false;
  // Linear weights: the input width (unsharded; the output width is elements / in_features).
  // 0 for every other tensor (embeddings are tables, not linears, and leave it 0 too).
  std::int64_t in_features = 0;
  std::int64_t Total() const { return elements * count; }
};

// Layer kinds: whether layer i (0-based, MTP layers continue after num_layers) is MoE.
// moe_layer_freq int N: layer i is MoE iff i % N == 0; list: per-layer flags (length must
// equal num_layers: caller validated). No experts: all dense. MTP layers copy the last
// layer's kind. Source: Megatron-LM theoretical_memory_usage.py / MCore moe_utils.
std::vector<bool> MoeLayerPattern(const ModelConfig& model);

// The tensors of one transformer layer of the given kind (attention incl. MLA, norms,
// dense MLP or MoE router + routed experts + shared experts + gate, biases per
// add_bias_linear / add_qkv_bias, qk_layernorm).
std::vector<ParamTensor> TransformerLayerParameters(const ModelConfig& model, bool moe_layer);

// Word embeddings (+ learned absolute position embeddings when used), for the given
// padded vocabulary size.
std::vector<ParamTensor> EmbeddingParameters(const ModelConfig& model, std::int64_t vocab);

// Final norm and output layer (the output layer is omitted when embeddings are tied).
std::vector<ParamTensor> OutputParameters(const ModelConfig& model, std::int64_t vocab);

// The tensors an MTP block adds beyond its transformer layer (enorm, hnorm, eh_proj, ...).
std::vector<ParamTensor> MtpExtraParameters(const ModelConfig& model);

// Receives tensors one at a time, in list order: the Add*Parameters functions below pass
// the same tensors as the list-returning functions above without building a vector (the
// estimator sums them on every estimate).
class ParamTensorSink {
 public:
  virtual void Add(const ParamTensor& tensor) = 0;

 protected:
  ~ParamTensorSink() = default;
};

// TransformerLayerParameters, EmbeddingParameters, OutputParameters and MtpExtraParameters,
// tensor by tensor into `sink` (same tensors, same order, same fields).
void AddTransformerLayerParameters(const ModelConfig& model, bool moe_layer, ParamTensorSink& sink);
void AddEmbeddingParameters(const ModelConfig& model, std::int64_t vocab, ParamTensorSink& sink);
void AddOutputParameters(const ModelConfig& model, std::int64_t vocab, ParamTensorSink& sink);
void AddMtpExtraParameters(const ModelConfig& model, ParamTensorSink& sink);

// Total parameter count of the model (unsharded), for the given vocabulary size: every
// tensor above, MTP blocks included, buffers (is_buffer) included, so that it equals the
// element count of a Megatron checkpoint. (A Hugging Face checkpoint can differ: see
// docs/catalog.md for DeepSeek-V3's duplicated MTP embedding and FP8 scales.)
// Example: llama3-70b with vocab 128256 -> 70,553,706,496.
std::int64_t CountParameters(const ModelConfig& model, std::int64_t vocab);

// The fields defaults resolve to when a ModelConfig leaves them 0 / unset (the Megatron-Core
// TransformerConfig defaults): kv_channels = hidden / heads, num_query_groups = heads,
// ffn_hidden_size = 4 * hidden, moe_ffn_hidden_size = ffn_hidden_size.
std::int64_t EffectiveKvChannels(const ModelConfig& model);
std::int64_t EffectiveQueryGroups(const ModelConfig& model);
std::int64_t EffectiveFfnHiddenSize(const ModelConfig& model);
std::int64_t EffectiveMoeFfnHiddenSize(const ModelConfig& model);

// Which core attention runs: TE's flash / cuDNN fused attention (attention_backend auto,
// flash or fused), TE's UnfusedDotProductAttention (unfused), or MCore's own
// DotProductAttention (attention_backend local, or the local transformer_impl's layer spec).
enum class CoreAttention { kFused, kTeUnfused, kLocal };
CoreAttention CoreAttentionOf(const ModelConfig& model);

}  // namespace memtune::model
