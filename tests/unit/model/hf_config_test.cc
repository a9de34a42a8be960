// HF config.json -> job `model:` mapping, one test per supported model_type. The inline
// configs restate the fields of the real checkpoints' config.json files (written here by
// hand, trimmed of tokenizer and generation keys).
#include "model/hf_config.h"

#include <gtest/gtest.h>

#include <string>

namespace memtune::model {
namespace {

constexpr const char* kField = "model.hf_config";

// meta-llama/Meta-Llama-3-8B
constexpr const char* kLlama3_8B = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 500000.0,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 128256})";

// Qwen/Qwen2.5-7B
constexpr const char* kQwen25_7B = R"({
  "architectures": ["Qwen2ForCausalLM"], "hidden_act": "silu", "hidden_size": 3584,
  "intermediate_size": 18944, "max_position_embeddings": 131072, "max_window_layers": 28,
  "model_type": "qwen2", "num_attention_heads": 28, "num_hidden_layers": 28,
  "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 131072, "tie_word_embeddings": false, "use_sliding_window": false,
  "vocab_size": 152064})";

// Qwen/Qwen3-8B
constexpr const char* kQwen3_8B = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 12288,
  "max_position_embeddings": 40960, "model_type": "qwen3", "num_attention_heads": 32,
  "num_hidden_layers": 36, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 1000000, "tie_word_embeddings": false,
  "vocab_size": 151936})";

// Qwen/Qwen3-30B-A3B
constexpr const char* kQwen3_30B_A3B = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "decoder_sparse_step": 1,
  "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 6144,
  "max_position_embeddings": 40960, "mlp_only_layers": [], "model_type": "qwen3_moe",
  "moe_intermediate_size": 768, "norm_topk_prob": true, "num_attention_heads": 32,
  "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48,
  "num_key_value_heads": 4, "router_aux_loss_coef": 0.001, "tie_word_embeddings": false,
  "vocab_size": 151936})";

// mistralai/Mixtral-8x7B-v0.1
constexpr const char* kMixtral = R"({
  "architectures": ["MixtralForCausalLM"], "hidden_act": "silu", "hidden_size": 4096,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mixtral",
  "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "num_local_experts": 8, "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02, "sliding_window": null,
  "tie_word_embeddings": false, "vocab_size": 32000})";

// deepseek-ai/DeepSeek-V3
constexpr const char* kDeepSeekV3 = R"({
  "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": false,
  "first_k_dense_replace": 3, "hidden_act": "silu", "hidden_size": 7168,
  "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840,
  "model_type": "deepseek_v3", "moe_intermediate_size": 2048, "moe_layer_freq": 1,
  "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": true,
  "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61,
  "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536,
  "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
  "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
                   "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
                   "type": "yarn"},
  "scoring_func": "sigmoid", "tie_word_embeddings": false, "topk_group": 4,
  "topk_method": "noaux_tc", "v_head_dim": 128, "vocab_size": 129280})";

// openai/gpt-oss-120b
constexpr const char* kGptOss120B = R"({
  "architectures": ["GptOssForCausalLM"], "attention_bias": true, "attention_dropout": 0.0,
  "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2880,
  "initial_context_length": 4096, "intermediate_size": 2880,
  "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_attention_heads": 64,
  "num_experts_per_tok": 4, "num_hidden_layers": 36, "num_key_value_heads": 8,
  "num_local_experts": 128, "quantization_config": {"quant_method": "mxfp4"},
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                   "original_max_position_embeddings": 4096, "rope_type": "yarn",
                   "truncate": false},
  "rope_theta": 150000, "sliding_window": 128, "swiglu_limit": 7.0,
  "tie_word_embeddings": false, "vocab_size": 201088})";

YAML::Node Convert(const char* json) {
  auto node = HfConfigToModelNode(json, kField);
  EXPECT_TRUE(node.has_value()) << (node ? "" : node.error().Describe());
  return node ? *node : YAML::Node();
}

std::int64_t Int(const YAML::Node& node, const char* key) { return node[key].as<std::int64_t>(); }
bool Bool(const YAML::Node& node, const char* key) { return node[key].as<bool>(); }
std::string Str(const YAML::Node& node, const char* key) { return node[key].as<std::string>(); }

TEST(HfConfigTest, LlamaWholeMapping) {
  EXPECT_EQ(YAML::Dump(Convert(kLlama3_8B)),
            "num_layers: 32\n"
            "hidden_size: 4096\n"
            "ffn_hidden_size: 14336\n"
            "num_attention_heads: 32\n"
            "num_query_groups: 8\n"
            "vocab_size: 128256\n"
            "make_vocab_size_divisible_by: 128\n"
            "share_embeddings_and_output_weights: false\n"
            "gated_linear_unit: true\n"
            "activation_func: silu\n"
            "normalization: RMSNorm\n"
            "add_bias_linear: false\n"
            "add_qkv_bias: false\n"
            "qk_layernorm: false\n"
            "hidden_dropout: 0\n"
            "attention_dropout: 0\n"
            "position_embedding_type: rope\n"
            "seq_length: 8192\n"
            "params_dtype: bf16\n"
            "bf16: true\n"
            "fp16: false");
}

// Bridge's dtype_from_hf: torch_dtype (or dtype) sets params_dtype and bf16 / fp16; absent,
// the parameters are fp32.
TEST(HfConfigTest, TorchDtypeSetsTheParameterPrecision) {
  EXPECT_EQ(Str(Convert(kLlama3_8B), "params_dtype"), "bf16");
  const YAML::Node qwen = Convert(kQwen25_7B);  // no torch_dtype key
  EXPECT_EQ(Str(qwen, "params_dtype"), "fp32");
  EXPECT_FALSE(Bool(qwen, "bf16"));
  const YAML::Node half = Convert(R"({"model_type": "llama", "hidden_size": 64,
      "intermediate_size": 128, "num_attention_heads": 4, "num_hidden_layers": 2,
      "vocab_size": 256, "dtype": "float16"})");
  EXPECT_EQ(Str(half, "params_dtype"), "fp16");
  EXPECT_TRUE(Bool(half, "fp16"));
  auto bad = HfConfigToModelNode(R"({"model_type": "llama", "hidden_size": 64,
      "intermediate_size": 128, "num_attention_heads": 4, "num_hidden_layers": 2,
      "vocab_size": 256, "torch_dtype": "float8_e4m3fn"})",
                                 kField);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().field, "model.hf_config.torch_dtype");
}

// Gemma: GeGLU (gelu_pytorch_tanh), head_dim 256, embeddings tied by default.
TEST(HfConfigTest, GemmaDefaults) {
  const YAML::Node m = Convert(R"({"model_type": "gemma", "head_dim": 256,
      "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2048,
      "intermediate_size": 16384, "num_attention_heads": 8, "num_hidden_layers": 18,
      "num_key_value_heads": 1, "vocab_size": 256000, "torch_dtype": "bfloat16"})");
  EXPECT_EQ(Str(m, "activation_func"), "gelu");
  EXPECT_TRUE(Bool(m, "gated_linear_unit"));
  EXPECT_TRUE(Bool(m, "share_embeddings_and_output_weights"));
  EXPECT_EQ(Int(m, "kv_channels"), 256);
}

TEST(HfConfigTest, Qwen2HasQkvBias) {
  const YAML::Node m = Convert(kQwen25_7B);
  EXPECT_TRUE(Bool(m, "add_qkv_bias"));
  EXPECT_FALSE(Bool(m, "add_bias_linear"));
  EXPECT_FALSE(Bool(m, "qk_layernorm"));
  EXPECT_EQ(Int(m, "make_vocab_size_divisible_by"), 128);  // 152064 = 128 * 1188
  EXPECT_EQ(Int(m, "seq_length"), 131072);
}

TEST(HfConfigTest, Qwen3HasQkLayernormAndHeadDim) {
  const YAML::Node m = Convert(kQwen3_8B);
  EXPECT_TRUE(Bool(m, "qk_layernorm"));
  EXPECT_FALSE(Bool(m, "add_qkv_bias"));
  EXPECT_EQ(Int(m, "kv_channels"), 128);
  EXPECT_EQ(Int(m, "ffn_hidden_size"), 12288);
  EXPECT_EQ(Int(m, "seq_length"), 40960);
}

// Bridge's Qwen2 / Qwen3 / Qwen3-MoE bridges leave TransformerConfig's
// bias_activation_fusion (False); the Llama bridge sets True (memtune's default: absent).
TEST(HfConfigTest, QwenBridgesLeaveBiasActivationFusionOff) {
  for (const char* config : {kQwen25_7B, kQwen3_8B, kQwen3_30B_A3B}) {
    const YAML::Node m = Convert(config);
    ASSERT_TRUE(m["bias_activation_fusion"]);
    EXPECT_FALSE(Bool(m, "bias_activation_fusion"));
  }
  EXPECT_FALSE(Convert(kLlama3_8B)["bias_activation_fusion"]);
}

TEST(HfConfigTest, Qwen3MoeExperts) {
  const YAML::Node m = Convert(kQwen3_30B_A3B);
  EXPECT_EQ(Int(m, "num_moe_experts"), 128);
  EXPECT_EQ(Int(m, "moe_router_topk"), 8);
  EXPECT_EQ(Int(m, "moe_ffn_hidden_size"), 768);
  EXPECT_FALSE(m["moe_shared_expert_intermediate_size"]);
  EXPECT_TRUE(Bool(m, "moe_grouped_gemm"));
  EXPECT_EQ(Str(m, "moe_token_dispatcher_type"), "alltoall");
  EXPECT_TRUE(Bool(m, "qk_layernorm"));
}

TEST(HfConfigTest, MixtralExpertsUseIntermediateSize) {
  const YAML::Node m = Convert(kMixtral);
  EXPECT_EQ(Int(m, "num_moe_experts"), 8);
  EXPECT_EQ(Int(m, "moe_router_topk"), 2);
  EXPECT_EQ(Int(m, "moe_ffn_hidden_size"), 14336);
  EXPECT_EQ(Int(m, "kv_channels"), 128);
  EXPECT_EQ(Int(m, "make_vocab_size_divisible_by"), 128);  // 32000 = 128 * 250
}

TEST(HfConfigTest, DeepSeekV3MlaDenseLayersSharedExpertAndMtp) {
  const YAML::Node m = Convert(kDeepSeekV3);
  EXPECT_TRUE(Bool(m, "multi_latent_attention"));
  EXPECT_EQ(Int(m, "q_lora_rank"), 1536);
  EXPECT_EQ(Int(m, "kv_lora_rank"), 512);
  EXPECT_EQ(Int(m, "qk_head_dim"), 128);
  EXPECT_EQ(Int(m, "qk_pos_emb_head_dim"), 64);
  EXPECT_EQ(Int(m, "v_head_dim"), 128);
  EXPECT_EQ(Int(m, "num_moe_experts"), 256);
  EXPECT_EQ(Int(m, "moe_shared_expert_intermediate_size"), 2048);
  EXPECT_EQ(Int(m, "mtp_num_layers"), 1);
  EXPECT_TRUE(Bool(m, "moe_router_enable_expert_bias"));
  EXPECT_EQ(Int(m, "make_vocab_size_divisible_by"), 1280);
  EXPECT_EQ(Str(m, "position_embedding_type"), "rope");  // MLA ignores yarn here
  const auto freq = m["moe_layer_freq"].as<std::vector<int>>();
  ASSERT_EQ(freq.size(), 61u);
  EXPECT_EQ(freq[2], 0);
  EXPECT_EQ(freq[3], 1);
  EXPECT_EQ(freq[60], 1);
}

TEST(HfConfigTest, DeepSeekWithoutQLoraRank) {
  std::string json = kDeepSeekV3;
  json.replace(json.find("\"q_lora_rank\": 1536"), 19, "\"q_lora_rank\": null");
  const YAML::Node m = Convert(json.c_str());
  EXPECT_TRUE(m["q_lora_rank"].IsNull());
}

TEST(HfConfigTest, GptOssSpecifics) {
  const YAML::Node m = Convert(kGptOss120B);
  EXPECT_EQ(Str(m, "activation_func"), "quick_gelu");
  EXPECT_TRUE(Bool(m, "gated_linear_unit"));
  EXPECT_TRUE(Bool(m, "add_bias_linear"));
  EXPECT_TRUE(Bool(m, "add_qkv_bias"));
  EXPECT_EQ(Str(m, "softmax_type"), "learnable");
  EXPECT_EQ(Str(m, "position_embedding_type"), "yarn");
  EXPECT_EQ(Int(m, "num_moe_experts"), 128);
  EXPECT_EQ(Int(m, "moe_router_topk"), 4);
  EXPECT_EQ(Int(m, "moe_ffn_hidden_size"), 2880);
  EXPECT_EQ(Int(m, "kv_channels"), 64);
  EXPECT_EQ(Int(m, "make_vocab_size_divisible_by"), 128);  // 201088 = 128 * 1571
}

TEST(HfConfigTest, UnsupportedModelTypeListsTheSupportedOnes) {
  auto node = HfConfigToModelNode(R"({"model_type": "bert", "hidden_size": 768})", kField);
  ASSERT_FALSE(node.has_value());
  EXPECT_EQ(node.error().code, ErrorCode::kUnsupported);
  EXPECT_EQ(node.error().Describe(),
            "model.hf_config.model_type: model_type 'bert' is not supported");
  EXPECT_EQ(node.error().hint,
            "supported: deepseek_v3, gemma, gemma2, gemma3, gemma3_text, gpt_oss, llama, mistral, "
            "mixtral, phi3, qwen2, qwen3, qwen3_moe");
}

// gemma3 nests the text model in text_config; its absent keys take Gemma3TextConfig's
// defaults, and the top-level torch_dtype carries in.
TEST(HfConfigTest, Gemma3ReadsTheNestedTextConfig) {
  const YAML::Node m = Convert(R"({"model_type": "gemma3", "torch_dtype": "bfloat16",
      "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 34}})");
  EXPECT_EQ(m["num_attention_heads"].as<int>(), 8);
  EXPECT_EQ(m["num_query_groups"].as<int>(), 4);
  EXPECT_EQ(m["kv_channels"].as<int>(), 256);
  EXPECT_EQ(m["vocab_size"].as<int>(), 262208);
  EXPECT_EQ(Str(m, "params_dtype"), "bf16");
  EXPECT_TRUE(m["qk_layernorm"].as<bool>());
  EXPECT_TRUE(m["sublayer_post_norms"].as<bool>());
  EXPECT_FALSE(m["final_logit_softcapping"]);
  auto missing = HfConfigToModelNode(R"({"model_type": "gemma3"})", kField);
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().Describe(),
            "model.hf_config.text_config: is required for model_type 'gemma3' (its text model)");
}

TEST(HfConfigTest, CloseModelTypeGetsASuggestion) {
  auto node = HfConfigToModelNode(R"({"model_type": "qwen3-moe"})", kField);
  ASSERT_FALSE(node.has_value());
  EXPECT_EQ(node.error().hint.rfind("did you mean 'qwen3_moe'? supported: ", 0), 0u);
}

TEST(HfConfigTest, MalformedJson) {
  auto node = HfConfigToModelNode("{\"model_type\": ", kField);
  ASSERT_FALSE(node.has_value());
  EXPECT_EQ(node.error().code, ErrorCode::kInvalidInput);
  EXPECT_EQ(node.error().field, "model.hf_config");
  EXPECT_EQ(node.error().message.rfind("is not valid JSON: [json.exception.parse_error.101]", 0),
            0u);
}

TEST(HfConfigTest, MissingAndMistypedKeys) {
  auto missing = HfConfigToModelNode(R"({"model_type": "llama", "num_hidden_layers": 2})", kField);
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().Describe(),
            "model.hf_config.hidden_size: is required in a Hugging Face config.json");
  std::string json = kLlama3_8B;
  json.replace(json.find("\"hidden_size\": 4096"), 19, "\"hidden_size\": \"4096\"");
  auto mistyped = HfConfigToModelNode(json, kField);
  ASSERT_FALSE(mistyped.has_value());
  EXPECT_EQ(mistyped.error().Describe(),
            "model.hf_config.hidden_size: must be an integer, got \"4096\"");
}

TEST(HfConfigTest, UnsupportedActivation) {
  std::string json = kLlama3_8B;
  json.replace(json.find("\"silu\""), 6, "\"mish\"");
  auto node = HfConfigToModelNode(json, kField);
  ASSERT_FALSE(node.has_value());
  EXPECT_EQ(node.error().Describe(),
            "model.hf_config.hidden_act: hidden_act 'mish' is not supported");
}

TEST(HfConfigTest, NotAnObject) {
  auto node = HfConfigToModelNode("[1, 2]", kField);
  ASSERT_FALSE(node.has_value());
  EXPECT_EQ(node.error().Describe(), "model.hf_config: must be a JSON object");
}

}  // namespace
}  // namespace memtune::model
