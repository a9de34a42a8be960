// Hugging Face config.json -> job-format `model:` mapping (see hf_config.h for sources).
#include "model/hf_config.h"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

#include "memtune/core/suggest.h"
#include "memtune/model/strict_json.h"
#include "model/job_schema.h"
#include "model/job_values.h"
#include "model/yaml_number.h"

namespace memtune::model {
namespace {

using nlohmann::json;

// Reads typed values of one config.json, naming "<field>.<key>" in errors.
class HfReader {
 public:
  HfReader(const json& root, std::string_view field) : root_(root), field_(field) {}

  std::string Path(std::string_view key) const { return field_ + "." + std::string(key); }
  bool Has(const char* key) const { return root_.contains(key) && !root_[key].is_null(); }

  Result<std::optional<std::int64_t>> OptInt(const char* key) const {
    if (!Has(key)) return std::optional<std::int64_t>();
    const json& v = root_[key];
    if (!v.is_number_integer())
      return InvalidInput(Path(key), "must be an integer, got " + JsonEcho(v));
    // get<int64_t> would wrap 2^63 and more into negative numbers.
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > INT64_MAX) {
      return InvalidInput(Path(key), Path(key) + " = " + v.dump() + " is out of range",
                          "allowed: an integer below 2^63");
    }
    return std::optional<std::int64_t>(v.get<std::int64_t>());
  }
  Result<std::int64_t> Int(const char* key) const {
    MEMTUNE_TRY(auto value, OptInt(key));
    if (!value) return InvalidInput(Path(key), "is required in a Hugging Face config.json");
    return *value;
  }
  Result<bool> Bool(const char* key, bool fallback) const {
    if (!Has(key)) return fallback;
    const json& v = root_[key];
    if (!v.is_boolean())
      return InvalidInput(Path(key), "must be true or false, got " + JsonEcho(v));
    return v.get<bool>();
  }
  Result<double> Number(const char* key, double fallback) const {
    if (!Has(key)) return fallback;
    const json& v = root_[key];
    if (!v.is_number()) return InvalidInput(Path(key), "must be a number, got " + JsonEcho(v));
    return v.get<double>();
  }
  Result<std::string> String(const char* key, const char* fallback) const {
    if (!Has(key)) return std::string(fallback);
    const json& v = root_[key];
    if (!v.is_string()) return InvalidInput(Path(key), "must be a string, got " + JsonEcho(v));
    return v.get<std::string>();
  }
  // rope_scaling.type or rope_scaling.rope_type, or "".
  std::string RopeType() const {
    if (!Has("rope_scaling") || !root_["rope_scaling"].is_object()) return "";
    const json& r = root_["rope_scaling"];
    for (const char* key : {"type", "rope_type"}) {
      if (r.contains(key) && r[key].is_string()) return r[key].get<std::string>();
    }
    return "";
  }

 private:
  const json& root_;
  std::string field_;
};

// Bridge model_bridge.py make_vocab_size_divisible_by: the largest power of two <= 128
// that divides the vocabulary.
std::int64_t VocabDivisor(std::int64_t vocab) {
  std::int64_t divisor = 128;
  while (divisor > 1 && vocab % divisor != 0) divisor /= 2;
  return divisor;
}

// Bridge utils/activation_map.py names -> memtune's activation_func values.
Result<std::string> Activation(const HfReader& hf) {
  const char* key = hf.Has("hidden_act") ? "hidden_act" : "hidden_activation";
  MEMTUNE_TRY(const std::string act, hf.String(key, "silu"));
  if (act == "silu" || act == "gelu" || act == "relu" || act == "quick_gelu") return act;
  // Gemma's GeGLU (tanh-approximated GELU): the same tensors as GELU.
  if (act == "gelu_pytorch_tanh" || act == "gelu_new") return std::string("gelu");
  if (act == "relu2" || act == "squared_relu") return std::string("squared_relu");
  return Unsupported(hf.Path(key), "hidden_act '" + act + "' is not supported",
                     "supported: gelu, gelu_pytorch_tanh, quick_gelu, relu, relu2, silu, "
                     "squared_relu");
}

// Bridge model_bridge.py dtype_from_hf(config, default=torch.float32): `torch_dtype` (or
// `dtype`, its transformers >= 4.56 name) sets params_dtype, and bf16 / fp16 with it, as
// every model bridge's provider_bridge does.
Status MapDtype(const HfReader& hf, YAML::Node& out) {
  const char* key = hf.Has("dtype") && !hf.Has("torch_dtype") ? "dtype" : "torch_dtype";
  MEMTUNE_TRY(const std::string dtype, hf.String(key, "float32"));
  const std::pair<const char*, const char*> kDtypes[] = {
      {"float32", "fp32"}, {"bfloat16", "bf16"}, {"float16", "fp16"}};
  for (const auto& [hf_name, name] : kDtypes) {
    if (dtype != hf_name) continue;
    out["params_dtype"] = name;
    out["bf16"] = dtype == "bfloat16";
    out["fp16"] = dtype == "float16";
    return OkStatus();
  }
  return Unsupported(hf.Path(key), std::string(key) + " '" + dtype + "' is not supported",
                     "supported: bfloat16, float16, float32");
}

// Copies an optional integer key to `out[name]`.
Status MapInt(const HfReader& hf, YAML::Node& out, const char* key, const char* name) {
  MEMTUNE_TRY(auto value, hf.OptInt(key));
  if (value) out[name] = *value;
  return OkStatus();
}

// model_bridge.py CONFIG_MAPPING (architecture subset) plus the activation and vocab
// divisor every bridge inherits. Absent keys take the transformers config class defaults
// (attention_bias: true for gpt_oss, false elsewhere; mlp_bias and tie_word_embeddings false).
Status MapCommon(const HfReader& hf, YAML::Node& out, bool attention_bias_default,
                 bool tie_default) {
  MEMTUNE_TRY(out["num_layers"], hf.Int("num_hidden_layers"));
  MEMTUNE_TRY(out["hidden_size"], hf.Int("hidden_size"));
  MEMTUNE_TRY(out["ffn_hidden_size"], hf.Int("intermediate_size"));
  MEMTUNE_TRY(out["num_attention_heads"], hf.Int("num_attention_heads"));
  MEMTUNE_RETURN_IF_ERROR(MapInt(hf, out, "num_key_value_heads", "num_query_groups"));
  MEMTUNE_RETURN_IF_ERROR(MapInt(hf, out, "head_dim", "kv_channels"));
  MEMTUNE_TRY(const std::int64_t vocab, hf.Int("vocab_size"));
  out["vocab_size"] = vocab;
  out["make_vocab_size_divisible_by"] = VocabDivisor(vocab);
  MEMTUNE_TRY(out["share_embeddings_and_output_weights"],
              hf.Bool("tie_word_embeddings", tie_default));
  out["gated_linear_unit"] = true;
  MEMTUNE_TRY(out["activation_func"], Activation(hf));
  out["normalization"] = "RMSNorm";
  MEMTUNE_TRY(out["add_bias_linear"], hf.Bool("mlp_bias", false));
  MEMTUNE_TRY(out["add_qkv_bias"], hf.Bool("attention_bias", attention_bias_default));
  MEMTUNE_TRY(out["qk_layernorm"], hf.Bool("use_qk_norm", false));
  out["hidden_dropout"] = 0.0;  // every supported bridge sets hidden_dropout = 0
  MEMTUNE_TRY(const double attention_dropout, hf.Number("attention_dropout", 0.0));
  out["attention_dropout"] = ShortestNumberNode(attention_dropout);
  // model_bridge.py provider_bridge: "yarn" when rope_scaling says so (GPT models), else rope.
  out["position_embedding_type"] = hf.RopeType() == "yarn" ? "yarn" : "rope";
  for (const char* key : {"num_experts", "num_local_experts", "n_routed_experts"}) {
    if (!out["num_moe_experts"]) MEMTUNE_RETURN_IF_ERROR(MapInt(hf, out, key, "num_moe_experts"));
  }
  MEMTUNE_RETURN_IF_ERROR(MapInt(hf, out, "num_experts_per_tok", "moe_router_topk"));
  MEMTUNE_RETURN_IF_ERROR(MapInt(hf, out, "moe_intermediate_size", "moe_ffn_hidden_size"));
  MEMTUNE_RETURN_IF_ERROR(MapInt(hf, out, "max_position_embeddings", "seq_length"));
  return MapDtype(hf, out);
}

void MoeDispatch(YAML::Node& out) {
  out["moe_grouped_gemm"] = true;
  out["moe_token_dispatcher_type"] = "alltoall";
}

// qwen/qwen2_bridge.py, qwen3_bridge.py, qwen3_moe_bridge.py. None of them sets
// bias_activation_fusion, so the provider keeps TransformerConfig's False (Megatron-Bridge
// 067f987d; the Llama, DeepSeek, GLM and GPT-OSS bridges set True): SwiGLU runs unfused.
void ApplyQwen(const std::string& type, YAML::Node& out) {
  out["bias_activation_fusion"] = false;
  out["add_bias_linear"] = false;
  out["add_qkv_bias"] = type == "qwen2";
  if (type != "qwen2") out["qk_layernorm"] = true;
  if (type == "qwen3_moe") MoeDispatch(out);
}

// Mixtral bridge (Bridge commit 1ee926b3): kv_channels = hidden / heads, experts use
// intermediate_size, MixtralModelProvider: no biases, no qk norm, grouped GEMM, alltoall.
void ApplyMixtral(YAML::Node& out) {
  const auto heads = out["num_attention_heads"].as<std::int64_t>();
  if (heads > 0) out["kv_channels"] = out["hidden_size"].as<std::int64_t>() / heads;
  out["moe_ffn_hidden_size"] = out["ffn_hidden_size"].as<std::int64_t>();
  out["add_bias_linear"] = false;
  out["qk_layernorm"] = false;
  MoeDispatch(out);
}

// deepseek/deepseek_v3_bridge.py: MLA with q/kv norms, sigmoid router with expert bias,
// first_k_dense_replace dense layers, shared experts, MTP.
Status ApplyDeepSeekV3(const HfReader& hf, YAML::Node& out) {
  out["add_bias_linear"] = false;
  out["share_embeddings_and_output_weights"] = false;
  out["qk_layernorm"] = true;
  out["position_embedding_type"] = "rope";
  out["multi_latent_attention"] = true;
  MEMTUNE_TRY(auto q_lora, hf.OptInt("q_lora_rank"));
  out["q_lora_rank"] = q_lora ? YAML::Node(*q_lora) : YAML::Node(YAML::NodeType::Null);
  MEMTUNE_TRY(out["kv_lora_rank"], hf.Int("kv_lora_rank"));
  MEMTUNE_TRY(out["qk_head_dim"], hf.Int("qk_nope_head_dim"));
  MEMTUNE_TRY(out["qk_pos_emb_head_dim"], hf.Int("qk_rope_head_dim"));
  MEMTUNE_TRY(out["v_head_dim"], hf.Int("v_head_dim"));
  out["make_vocab_size_divisible_by"] = 1280;
  out["moe_router_enable_expert_bias"] = true;
  out["moe_shared_expert_overlap"] = true;
  MoeDispatch(out);
  MEMTUNE_TRY(auto dense, hf.OptInt("first_k_dense_replace"));
  const std::int64_t layers = out["num_layers"].as<std::int64_t>();
  if (layers < 1 || layers > internal::kMaxLayers) {  // before the per-layer list below is built
    return internal::OutOfRange(hf.Path("num_hidden_layers"), std::to_string(layers), 1,
                                internal::kMaxLayers);
  }
  const std::int64_t first_dense = std::clamp<std::int64_t>(dense.value_or(3), 0, layers);
  YAML::Node freq(YAML::NodeType::Sequence);
  freq.SetStyle(YAML::EmitterStyle::Flow);
  for (std::int64_t i = 0; i < layers; ++i) freq.push_back(i < first_dense ? 0 : 1);
  out["moe_layer_freq"] = freq;
  MEMTUNE_TRY(auto expert_ffn, hf.OptInt("moe_intermediate_size"));
  MEMTUNE_TRY(auto shared, hf.OptInt("n_shared_experts"));
  std::int64_t shared_ffn = 0;
  if (__builtin_mul_overflow(expert_ffn.value_or(2048), shared.value_or(1), &shared_ffn) ||
      shared_ffn < 0 || shared_ffn > internal::kMaxDim) {
    return internal::OutOfRange(
        hf.Path("n_shared_experts"),
        std::to_string(shared.value_or(1)) + " (times moe_intermediate_size " +
            std::to_string(expert_ffn.value_or(2048)) + " gives the shared-expert size)",
        0, internal::kMaxDim);
  }
  out["moe_shared_expert_intermediate_size"] = shared_ffn;
  MEMTUNE_TRY(auto mtp, hf.OptInt("num_nextn_predict_layers"));
  if (mtp.value_or(0) > 0) out["mtp_num_layers"] = *mtp;
  return OkStatus();
}

// gpt_oss/gpt_oss_bridge.py: biases everywhere, GLU with quick_gelu, learnable sinks, YaRN,
// experts as wide as intermediate_size.
Status ApplyGptOss(const HfReader& hf, YAML::Node& out) {
  out["add_bias_linear"] = true;
  MEMTUNE_TRY(out["add_qkv_bias"], hf.Bool("attention_bias", true));
  out["share_embeddings_and_output_weights"] = false;
  out["activation_func"] = "quick_gelu";
  out["position_embedding_type"] = "yarn";
  out["softmax_type"] = "learnable";
  out["moe_ffn_hidden_size"] = out["ffn_hidden_size"].as<std::int64_t>();
  MoeDispatch(out);
  return OkStatus();
}

// transformers' Gemma2Config / Gemma3TextConfig defaults for the keys the model mapping
// reads: real Gemma 3 config.json files leave most of text_config at them.
json GemmaDefaults(const std::string& type) {
  json d = {{"vocab_size", 256000},
            {"hidden_size", 2304},
            {"intermediate_size", 9216},
            {"num_hidden_layers", 26},
            {"num_attention_heads", 8},
            {"num_key_value_heads", 4},
            {"head_dim", 256},
            {"hidden_activation", "gelu_pytorch_tanh"},
            {"max_position_embeddings", 8192},
            {"tie_word_embeddings", true}};
  if (type == "gemma2") {
    d["final_logit_softcapping"] = 30.0;
  } else {
    d["vocab_size"] = 262208;
    d["max_position_embeddings"] = 131072;
  }
  return d;
}

// Gemma 2 and 3 (`gemma3` nests the text model in text_config): the config with the
// transformers defaults filled in, and the top-level dtype carried into text_config.
Result<json> GemmaConfig(const json& root, const std::string& type, std::string_view field) {
  json config = root;
  if (type == "gemma3") {
    if (!root.contains("text_config") || !root["text_config"].is_object()) {
      return InvalidInput(std::string(field) + ".text_config",
                          "is required for model_type 'gemma3' (its text model)");
    }
    config = root["text_config"];
    for (const char* key : {"torch_dtype", "dtype"}) {
      if (!config.contains(key) && root.contains(key)) config[key] = root[key];
    }
  }
  const json defaults = GemmaDefaults(type);
  for (const auto& [key, value] : defaults.items()) {
    if (!config.contains(key)) config[key] = value;
  }
  return config;
}

// gemma/gemma2_provider.py and gemma3_provider.py: post norms after linear_proj and
// linear_fc2 (TERowParallelLinearLayerNorm), no biases, tied embeddings; Gemma 3 adds q/k
// norms (TENorm over the head dim); Gemma 2 soft-caps the final logits (Gemma2OutputLayer).
// Attention-logit soft-capping, query_pre_attn_scalar and the sliding window change no
// saved tensor: FlexAttention (Gemma 2) and TE's flash kernels (Gemma 3) apply them inside
// the kernel and keep only the output and the softmax statistics.
Status ApplyGemma2Family(const HfReader& hf, const std::string& type, YAML::Node& out) {
  out["sublayer_post_norms"] = true;
  out["add_bias_linear"] = false;
  out["add_qkv_bias"] = false;
  out["qk_layernorm"] = type != "gemma2";
  MEMTUNE_TRY(const double cap, hf.Number("final_logit_softcapping", 0.0));
  if (cap > 0) out["final_logit_softcapping"] = ShortestNumberNode(cap);
  return OkStatus();
}

}  // namespace

std::vector<std::string> SupportedHfModelTypes() {
  return {"deepseek_v3", "gemma",   "gemma2", "gemma3", "gemma3_text", "gpt_oss",  "llama",
          "mistral",     "mixtral", "phi3",   "qwen2",  "qwen3",       "qwen3_moe"};
}

Result<YAML::Node> HfConfigToModelNode(std::string_view json_text, std::string_view field) {
  MEMTUNE_TRY(const json root, ParseStrictJson(json_text, field));
  if (!root.is_object()) return InvalidInput(std::string(field), "must be a JSON object");
  const HfReader hf(root, field);
  MEMTUNE_TRY(const std::string type, hf.String("model_type", ""));
  const std::vector<std::string> supported = SupportedHfModelTypes();
  if (std::find(supported.begin(), supported.end(), type) == supported.end()) {
    std::string hint = DidYouMean(type, supported);
    hint += std::string(hint.empty() ? "" : " ") + "supported: " + JoinNames(supported);
    return Unsupported(hf.Path("model_type"), "model_type '" + type + "' is not supported", hint);
  }
  YAML::Node out(YAML::NodeType::Map);
  if (type == "gemma2" || type == "gemma3" || type == "gemma3_text") {
    MEMTUNE_TRY(const json config, GemmaConfig(root, type, field));
    const HfReader text(config, type == "gemma3" ? std::string(field) + ".text_config" : field);
    MEMTUNE_RETURN_IF_ERROR(MapCommon(text, out, false, true));
    MEMTUNE_RETURN_IF_ERROR(ApplyGemma2Family(text, type, out));
    return out;
  }
  // transformers' GemmaConfig ties the embeddings by default; the others do not.
  MEMTUNE_RETURN_IF_ERROR(MapCommon(hf, out, type == "gpt_oss", type == "gemma"));
  if (type.rfind("qwen", 0) == 0) ApplyQwen(type, out);
  if (type == "mixtral") ApplyMixtral(out);
  if (type == "deepseek_v3") MEMTUNE_RETURN_IF_ERROR(ApplyDeepSeekV3(hf, out));
  if (type == "gpt_oss") MEMTUNE_RETURN_IF_ERROR(ApplyGptOss(hf, out));
  return out;
}

}  // namespace memtune::model
