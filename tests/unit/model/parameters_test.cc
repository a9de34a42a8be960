// Exact parameter counts from hand-built ModelConfig values (no parser involved).
#include "memtune/model/parameters.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace memtune::model {
namespace {

ModelConfig Llama(std::int64_t layers, std::int64_t hidden, std::int64_t ffn, std::int64_t heads,
                  std::int64_t groups, std::int64_t vocab) {
  ModelConfig m;
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.ffn_hidden_size = ffn;
  m.num_attention_heads = heads;
  m.num_query_groups = groups;
  m.kv_channels = 128;
  m.vocab_size = vocab;
  m.share_embeddings_and_output_weights = false;
  m.gated_linear_unit = true;
  m.activation_func = "silu";
  m.normalization = Normalization::kRMSNorm;
  m.add_bias_linear = false;
  m.position_embedding_type = PositionEmbedding::kRope;
  return m;
}

ModelConfig Qwen3Moe30B() {
  ModelConfig m = Llama(48, 2048, 6144, 32, 4, 151936);
  m.qk_layernorm = true;
  m.num_moe_experts = 128;
  m.moe_router_topk = 8;
  m.moe_ffn_hidden_size = 768;
  return m;
}

ModelConfig GptOss120B() {
  ModelConfig m = Llama(36, 2880, 2880, 64, 8, 201088);
  m.kv_channels = 64;
  m.add_bias_linear = true;
  m.add_qkv_bias = true;
  m.activation_func = "quick_gelu";
  m.softmax_type = SoftmaxType::kLearnable;
  m.num_moe_experts = 128;
  m.moe_router_topk = 4;
  m.moe_ffn_hidden_size = 2880;
  return m;
}

ModelConfig DeepSeekV3() {
  ModelConfig m = Llama(61, 7168, 18432, 128, 128, 129280);
  m.qk_layernorm = true;
  m.multi_latent_attention = true;
  m.q_lora_rank = 1536;
  m.kv_lora_rank = 512;
  m.qk_head_dim = 128;
  m.qk_pos_emb_head_dim = 64;
  m.v_head_dim = 128;
  m.num_moe_experts = 256;
  m.moe_router_topk = 8;
  m.moe_ffn_hidden_size = 2048;
  m.moe_shared_expert_intermediate_size = 2048;
  m.moe_router_enable_expert_bias = true;
  m.moe_layer_freq = std::vector<int>(3, 0);
  m.moe_layer_freq.resize(61, 1);
  m.moe_layer_freq_is_list = true;
  return m;
}

const ParamTensor* Find(const std::vector<ParamTensor>& tensors, const std::string& name) {
  auto it = std::find_if(tensors.begin(), tensors.end(),
                         [&](const ParamTensor& t) { return name == t.name; });
  return it == tensors.end() ? nullptr : &*it;
}

TEST(ParametersTest, Llama3_8B) {
  EXPECT_EQ(CountParameters(Llama(32, 4096, 14336, 32, 8, 128256), 128256), 8'030'261'248);
}

TEST(ParametersTest, Llama3_70B) {
  EXPECT_EQ(CountParameters(Llama(80, 8192, 28672, 64, 8, 128256), 128256), 70'553'706'496);
}

TEST(ParametersTest, Qwen3_8B) {
  ModelConfig m = Llama(36, 4096, 12288, 32, 8, 151936);
  m.qk_layernorm = true;
  EXPECT_EQ(CountParameters(m, 151936), 8'190'735'360);
}

TEST(ParametersTest, Llama31_405B) {
  EXPECT_EQ(CountParameters(Llama(126, 16384, 53248, 128, 8, 128256), 128256), 405'853'388'800);
}

TEST(ParametersTest, TiedEmbeddingsDropTheOutputLayer) {
  ModelConfig m = Llama(16, 2048, 8192, 32, 8, 128256);
  m.kv_channels = 64;
  m.share_embeddings_and_output_weights = true;
  EXPECT_EQ(CountParameters(m, 128256), 1'235'814'400);  // Llama-3.2-1B
  EXPECT_EQ(Find(OutputParameters(m, 128256), "output_layer.weight"), nullptr);
}

TEST(ParametersTest, Qwen3_30B_A3B) {
  EXPECT_EQ(CountParameters(Qwen3Moe30B(), 151936), 30'532'122'624);
}

TEST(ParametersTest, Llama32_3B) {
  ModelConfig m = Llama(28, 3072, 8192, 24, 8, 128256);
  m.share_embeddings_and_output_weights = true;
  EXPECT_EQ(CountParameters(m, 128256), 3'212'749'824);
}

TEST(ParametersTest, Qwen3_235B_A22B) {
  ModelConfig m = Qwen3Moe30B();
  m.num_layers = 94;
  m.hidden_size = 4096;
  m.num_attention_heads = 64;
  m.moe_ffn_hidden_size = 1536;
  EXPECT_EQ(CountParameters(m, 151936), 235'093'634'560);
}

TEST(ParametersTest, Mixtral8x7B) {
  ModelConfig m = Llama(32, 4096, 14336, 32, 8, 32000);
  m.num_moe_experts = 8;
  EXPECT_EQ(CountParameters(m, 32000), 46'702'792'704);
}

TEST(ParametersTest, GptOss20B) {
  ModelConfig m = GptOss120B();
  m.num_layers = 24;
  m.num_moe_experts = 32;
  EXPECT_EQ(CountParameters(m, 201088), 20'914'757'184);
}

TEST(ParametersTest, GptOss120BCountsBiasesAndSinks) {
  const ModelConfig m = GptOss120B();
  EXPECT_EQ(CountParameters(m, 201088), 116'829'156'672);
  const auto layer = TransformerLayerParameters(m, true);
  const ParamTensor* sinks = Find(layer, "self_attention.core_attention.softmax_offset");
  ASSERT_NE(sinks, nullptr);
  EXPECT_EQ(sinks->elements, 64);
  const ParamTensor* fc1_bias = Find(layer, "mlp.experts.linear_fc1.bias");
  ASSERT_NE(fc1_bias, nullptr);
  EXPECT_EQ(fc1_bias->elements, 2 * 2880);
  EXPECT_EQ(fc1_bias->count, 128);
  EXPECT_TRUE(fc1_bias->expert);
  ASSERT_NE(Find(layer, "mlp.router.bias"), nullptr);
}

TEST(ParametersTest, DeepSeekV3MainModelAndMtp) {
  ModelConfig m = DeepSeekV3();
  EXPECT_EQ(CountParameters(m, 129280), 671'026'419'200);
  m.mtp_num_layers = 1;
  // One MoE transformer layer + enorm + hnorm + eh_proj (2h x h) + final norm.
  EXPECT_EQ(CountParameters(m, 129280), 671'026'419'200 + 11'610'068'224);
}

TEST(ParametersTest, MlaLayerShapes) {
  const auto layer = TransformerLayerParameters(DeepSeekV3(), true);
  const ParamTensor* down = Find(layer, "self_attention.linear_q_down_proj.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->elements, 7168 * 1536);
  EXPECT_EQ(down->tp_split, TpSplit::kReplicated);
  const ParamTensor* kv_up = Find(layer, "self_attention.linear_kv_up_proj.weight");
  ASSERT_NE(kv_up, nullptr);
  EXPECT_EQ(kv_up->elements, 512 * 128 * 256);
  EXPECT_EQ(kv_up->tp_split, TpSplit::kColumn);
  const ParamTensor* bias = Find(layer, "mlp.router.expert_bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_TRUE(bias->is_buffer);
  const ParamTensor* shared = Find(layer, "mlp.shared_experts.linear_fc1.weight");
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(shared->elements, 7168 * 4096);
}

TEST(ParametersTest, MlaWithoutQLoraUsesOneQProjection) {
  ModelConfig m = DeepSeekV3();
  m.q_lora_rank.reset();
  const auto layer = TransformerLayerParameters(m, false);
  EXPECT_EQ(Find(layer, "self_attention.linear_q_down_proj.weight"), nullptr);
  const ParamTensor* q = Find(layer, "self_attention.linear_q_proj.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->elements, 7168 * 128 * 192);
}

TEST(ParametersTest, Gpt3StyleLayerNormBiasesAndPositions) {
  ModelConfig m;  // MCore defaults: LayerNorm, biases, learned positions, tied embeddings
  m.num_layers = 96;
  m.hidden_size = 12288;
  m.num_attention_heads = 96;
  m.seq_length = 2048;
  const std::int64_t h = 12288;
  const std::int64_t per_layer = 12 * h * h + 13 * h;
  EXPECT_EQ(CountParameters(m, 50304), 96 * per_layer + 50304 * h + 2048 * h + 2 * h);
  const auto layer = TransformerLayerParameters(m, false);
  const ParamTensor* proj_bias = Find(layer, "self_attention.linear_proj.bias");
  ASSERT_NE(proj_bias, nullptr);
  EXPECT_EQ(proj_bias->tp_split, TpSplit::kReplicated);
  ASSERT_NE(Find(layer, "mlp.linear_fc1.layer_norm_bias"), nullptr);
}

TEST(ParametersTest, SharedExpertGateAndLatentProjections) {
  ModelConfig m = Qwen3Moe30B();
  m.moe_shared_expert_intermediate_size = 1024;
  m.moe_shared_expert_gate = true;
  m.moe_latent_size = 512;
  const auto layer = TransformerLayerParameters(m, true);
  const ParamTensor* gate = Find(layer, "mlp.shared_experts.gate_weight");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->elements, 2048);
  const ParamTensor* fc1 = Find(layer, "mlp.experts.linear_fc1.weight");
  ASSERT_NE(fc1, nullptr);
  EXPECT_EQ(fc1->elements, 512 * 2 * 768);  // experts see the latent width
  ASSERT_NE(Find(layer, "mlp.fc1_latent_proj.weight"), nullptr);
}

TEST(ParametersTest, MoeLayerPatternIntListAndMtp) {
  ModelConfig m = Qwen3Moe30B();
  m.num_layers = 4;
  m.moe_layer_freq = {2};
  EXPECT_EQ(MoeLayerPattern(m), (std::vector<bool>{true, false, true, false}));
  m.moe_layer_freq = {0, 0, 1, 1};
  m.moe_layer_freq_is_list = true;
  m.mtp_num_layers = 2;
  EXPECT_EQ(MoeLayerPattern(m), (std::vector<bool>{false, false, true, true, true, true}));
  m.num_moe_experts.reset();
  EXPECT_EQ(MoeLayerPattern(m), (std::vector<bool>(6, false)));
}

TEST(ParametersTest, EffectiveDefaults) {
  ModelConfig m;
  m.hidden_size = 4096;
  m.num_attention_heads = 32;
  EXPECT_EQ(EffectiveKvChannels(m), 128);
  EXPECT_EQ(EffectiveQueryGroups(m), 32);
  EXPECT_EQ(EffectiveFfnHiddenSize(m), 16384);
  EXPECT_EQ(EffectiveMoeFfnHiddenSize(m), 16384);
}

}  // namespace
}  // namespace memtune::model
