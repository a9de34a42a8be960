// Megatron-Bridge estimator: upstream's own conformance vectors (megatron.md §1.10, from
// Megatron-Bridge tests/unit_tests/training/utils/test_theoretical_memory_utils.py) and
// its error texts.
#include <gtest/gtest.h>

#include <string>

#include "estimate/bridge_formula.h"
#include "estimate/compat_common.h"

namespace memtune::estimate::bridge {
namespace {

// Upstream _make_config(): L=4, h=16, s=8, f=64, a=4, g=None, d=4, vocab 32 unpadded,
// tied, TP2 PP2, no MoE, SP + selective, mbs 2, distributed optimizer, DP 4.
Config BaseConfig() {
  Config c;
  c.num_layers = 4;
  c.hidden_size = 16;
  c.seq_length = 8;
  c.ffn_hidden_size = 64;
  c.num_attention_heads = 4;
  c.kv_channels = 4;
  c.vocab_size = 32;
  c.make_vocab_size_divisible_by = 1;
  c.should_pad_vocab = false;
  c.share_embeddings_and_output_weights = true;
  c.tensor_model_parallel_size = 2;
  c.pipeline_model_parallel_size = 2;
  c.moe_router_topk = 1;
  c.sequence_parallel = true;
  c.recompute_selective = true;
  c.micro_batch_size = 2;
  c.use_distributed_optimizer = true;
  c.data_parallel_size = 4;
  return c;
}

Config UnevenConfig() {
  Config c = BaseConfig();
  c.num_layers = 8;
  c.tensor_model_parallel_size = 1;
  c.pipeline_model_parallel_size = 4;
  c.num_layers_in_first_pipeline_stage = 1;
  c.num_layers_in_last_pipeline_stage = 3;
  c.share_embeddings_and_output_weights = false;
  return c;
}

TrainingMemoryEstimate Estimate(const Config& c, std::optional<std::int64_t> nmb = std::nullopt,
                                bool include_activation = false) {
  auto r = EstimateTrainingMemory(c, nmb, include_activation);
  EXPECT_TRUE(r.has_value()) << r.error().Describe();
  return r.has_value() ? *r : TrainingMemoryEstimate{};
}

std::string ErrorOf(const Config& c, bool include_activation = true) {
  auto r = EstimateTrainingMemory(c, 4, include_activation);
  return r.has_value() ? "(no error)" : r.error().Describe();
}

TEST(BridgeFormulaTest, DenseModelStateMatchesLegacyArithmetic) {
  const TrainingMemoryEstimate e = Estimate(BaseConfig());
  ASSERT_EQ(e.model_state_components.size(), 1u);
  const Component& dense = e.model_state_components[0];
  EXPECT_EQ(dense.name, "dense parameters and optimizer");
  EXPECT_EQ(dense.parameter_count, 13088);
  EXPECT_EQ(dense.parameter_count_per_gpu, 3400);
  EXPECT_EQ(dense.bytes_per_parameter, 9);
  EXPECT_EQ(e.WeightAndOptimizerBytes(), 30600);
  EXPECT_EQ(e.total_parameters, 13088);
  EXPECT_FALSE(e.activation.has_value());
}

TEST(BridgeFormulaTest, UnevenPipelineUsesHeaviestStage) {
  const TrainingMemoryEstimate e = Estimate(UnevenConfig());
  EXPECT_EQ(e.model_state_components[0].parameter_count_per_gpu, 9952);
  EXPECT_EQ(e.model_state_components[0].memory_bytes, 89568);
}

TEST(BridgeFormulaTest, MoeLayerPatternOnUnevenStages) {
  Config c = UnevenConfig();
  c.num_moe_experts = 2;
  c.moe_layer_freq = {0, 1, 0, 0, 1, 0, 1, 1};
  c.moe_layer_freq_is_list = true;
  c.moe_ffn_hidden_size = 32;
  const TrainingMemoryEstimate e = Estimate(c);
  ASSERT_EQ(e.model_state_components.size(), 2u);
  EXPECT_EQ(e.model_state_components[0].parameter_count_per_gpu, 5856);
  EXPECT_EQ(e.model_state_components[1].name, "routed expert parameters and optimizer");
  EXPECT_EQ(e.model_state_components[1].parameter_count_per_gpu, 4096);
}

TEST(BridgeFormulaTest, ExpertParallelShardingAndContextParallelOptimizerShard) {
  Config c = BaseConfig();
  c.pipeline_model_parallel_size = 1;
  c.context_parallel_size = 2;
  c.num_moe_experts = 8;
  c.moe_layer_freq = {2};
  c.moe_ffn_hidden_size = 32;
  c.expert_model_parallel_size = 4;
  c.data_parallel_size = 8;
  const TrainingMemoryEstimate e = Estimate(c);
  ASSERT_EQ(e.model_state_components.size(), 2u);
  const Component& dense = e.model_state_components[0];
  const Component& routed = e.model_state_components[1];
  EXPECT_EQ(dense.parameter_count, 8992);
  EXPECT_EQ(dense.parameter_count_per_gpu, 4496);
  EXPECT_EQ(dense.bytes_per_parameter, 6.75);
  EXPECT_EQ(dense.memory_bytes, 30348);
  EXPECT_EQ(routed.parameter_count, 16384);
  EXPECT_EQ(routed.parameter_count_per_gpu, 4096);
  EXPECT_EQ(routed.bytes_per_parameter, 7.5);
  EXPECT_EQ(routed.memory_bytes, 30720);
  EXPECT_EQ(e.WeightAndOptimizerBytes(), 61068);
  EXPECT_EQ(ExpertOptimizerShardSize(c), 8);  // DP 8 * TP 2 * CP 2 // (EP 4 * ETP 1)
}

TEST(BridgeFormulaTest, ActivationIsPartitionedByTensorAndContextParallelism) {
  Config c = BaseConfig();
  c.pipeline_model_parallel_size = 1;
  c.context_parallel_size = 2;
  const TrainingMemoryEstimate e = Estimate(c, 1, true);
  ASSERT_TRUE(e.activation.has_value());
  EXPECT_EQ(e.activation->memory_bytes, 9568);
  EXPECT_EQ(e.TotalMemoryBytes(), e.WeightAndOptimizerBytes() + 9568);
}

TEST(BridgeFormulaTest, ListPatternSharedExpertLatentAndMtpCounts) {
  Config c = BaseConfig();
  c.pipeline_model_parallel_size = 1;
  c.num_moe_experts = 4;
  c.moe_layer_freq = {0, 1, 0, 1};
  c.moe_layer_freq_is_list = true;
  c.moe_ffn_hidden_size = 32;
  c.moe_shared_expert_intermediate_size = 8;
  c.moe_latent_size = 4;
  c.mtp_num_layers = 1;
  const TrainingMemoryEstimate e = Estimate(c);
  ASSERT_EQ(e.model_state_components.size(), 2u);
  EXPECT_EQ(e.model_state_components[0].parameter_count, 11232);
  EXPECT_EQ(e.model_state_components[0].parameter_count_per_gpu, 5616);
  EXPECT_EQ(e.model_state_components[1].parameter_count, 3072);
  EXPECT_EQ(e.model_state_components[1].parameter_count_per_gpu, 3072);
  EXPECT_EQ(e.total_parameters, 14304);
  auto pattern = MoeLayerPattern(c);
  ASSERT_TRUE(pattern.has_value());
  EXPECT_EQ(*pattern, (std::vector<bool>{false, true, false, true, true}));  // MTP copies last
}

TEST(BridgeFormulaTest, VirtualPipelinePenalty) {
  Config c = BaseConfig();
  c.virtual_pipeline_model_parallel_size = 2;
  EXPECT_EQ(*ActivationMemoryBytes(c, 4), 22240);
  EXPECT_EQ(*ActivationMemoryBytes(c, 1), 22240);  // VPP ignores the micro-batch count
}

TEST(BridgeFormulaTest, ActivationMicrobatchFactor) {
  const Config c = BaseConfig();
  EXPECT_EQ(*ActivationMemoryBytes(c, 1), 8896);
  EXPECT_EQ(*ActivationMemoryBytes(c, 2), 17792);
  EXPECT_EQ(*ActivationMemoryBytes(c, 4), 17792);
  EXPECT_EQ(*ActivationMemoryBytes(c, std::nullopt), 17792);
}

TEST(BridgeFormulaTest, FormatReportsComponentsAndUnits) {
  const TrainingMemoryEstimate e = Estimate(BaseConfig());
  EXPECT_EQ(*FormatTrainingMemoryEstimate(e, "GB"),
            "Theoretical memory footprints: dense parameters and optimizer=0.00 GB, total=0.00 GB");
  EXPECT_EQ(*FormatTrainingMemoryEstimate(Estimate(BaseConfig(), 4, true), "mb"),
            "Theoretical memory footprints: dense parameters and optimizer=0.03 MB, "
            "activation=0.02 MB, total=0.05 MB");
  auto bad = FormatTrainingMemoryEstimate(e, "bytes");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message, "Unsupported memory unit: BYTES");
}

TEST(BridgeFormulaTest, ReportLineFollowsTheSelectiveAndSpGate) {
  Config c = BaseConfig();
  EXPECT_EQ(*ReportTheoreticalMemoryLine(c, 4),
            "Theoretical memory footprints: weight and optimizer=0.03 MB, activation=0.02 MB, "
            "total=0.05 MB");
  c.recompute_selective = false;
  EXPECT_EQ(*ReportTheoreticalMemoryLine(c, 4),
            "Theoretical memory footprints: weight and optimizer=0.03 MB");
  c.recompute_selective = true;
  c.sequence_parallel = false;
  EXPECT_EQ(*ReportTheoreticalMemoryLine(c, 4),
            "Theoretical memory footprints: weight and optimizer=0.03 MB");
}

TEST(BridgeFormulaTest, AssumptionStrings) {
  Config c = BaseConfig();
  c.pipeline_model_parallel_size = 1;
  c.context_parallel_size = 2;
  c.num_moe_experts = 8;
  c.moe_layer_freq = {2};
  c.expert_model_parallel_size = 4;
  const TrainingMemoryEstimate e = Estimate(c, 1, true);
  ASSERT_EQ(e.assumptions.size(), 6u);
  EXPECT_EQ(e.assumptions[0],
            "Reports the most-loaded GPU shard; runtime allocator, kernel workspace, and CUDA "
            "graph buffers are excluded.");
  EXPECT_EQ(e.assumptions[3],
            "Routed MoE expert parameters are sharded by expert_model_parallel_size and "
            "expert_tensor_parallel_size; routed expert optimizer state uses the expert "
            "data-parallel shard size.");
  EXPECT_EQ(e.assumptions[4],
            "Dense optimizer state and activations are divided across context parallel ranks.");
  EXPECT_EQ(Estimate(BaseConfig()).assumptions.size(), 3u);
}

TEST(BridgeFormulaTest, GatedProjectionFactorNeedsSilu) {
  Config c = BaseConfig();
  c.gated_linear_unit = true;
  const double two = Estimate(c).model_state_components[0].parameter_count;
  c.activation_is_silu = true;
  const double three = Estimate(c).model_state_components[0].parameter_count;
  EXPECT_EQ(three - two, 4 * 16 * 64);  // one more h*f projection per layer
}

TEST(BridgeFormulaTest, UnevenPipelineErrors) {
  Config c = UnevenConfig();
  c.pipeline_model_parallel_size = 1;
  EXPECT_EQ(ErrorOf(c),
            "model.pipeline_model_parallel_size: Uneven pipeline stages require "
            "pipeline_model_parallel_size greater than 1");
  c = UnevenConfig();
  c.pipeline_model_parallel_size = 2;
  EXPECT_EQ(ErrorOf(c),
            "model.num_layers: Uneven pipeline stage layer counts do not cover all model layers");
  c = UnevenConfig();
  c.num_layers = 9;
  EXPECT_EQ(ErrorOf(c),
            "model.num_layers: Model layers must divide evenly over the remaining pipeline stages");
  c = UnevenConfig();
  c.virtual_pipeline_model_parallel_size = 2;
  EXPECT_EQ(ErrorOf(c),
            "model.virtual_pipeline_model_parallel_size: Each uneven pipeline stage layer count "
            "must divide over virtual pipeline stages");
  c = UnevenConfig();
  c.num_layers_in_first_pipeline_stage = 0;
  EXPECT_EQ(ErrorOf(c),
            "model.num_layers_in_first_pipeline_stage: "
            "num_layers_in_first_pipeline_stage must be positive");
}

TEST(BridgeFormulaTest, InterleavedUnevenStagesAssignChunksRoundRobin) {
  Config c = UnevenConfig();  // counts [1, 2, 2, 3] do not divide by 2; use [2, 2, 2, 2]
  c.num_layers_in_first_pipeline_stage = 2;
  c.num_layers_in_last_pipeline_stage = 2;
  c.virtual_pipeline_model_parallel_size = 2;
  c.num_moe_experts = 2;
  c.moe_layer_freq = {1, 1, 1, 1, 0, 0, 0, 0};  // experts only on layers 0-3
  c.moe_layer_freq_is_list = true;
  const TrainingMemoryEstimate e = Estimate(c);
  // Round-robin puts layers {0, 4}, {1, 5}, {2, 6}, {3, 7} on ranks 0..3: one MoE layer each,
  // so the heaviest stage holds one layer's experts (2 * 16 * 64 * 2 = 4096).
  EXPECT_EQ(e.model_state_components[1].parameter_count_per_gpu, 4096);
}

TEST(BridgeFormulaTest, MoeLayerFreqErrors) {
  Config c = BaseConfig();
  c.num_moe_experts = 2;
  c.moe_layer_freq = {0, 1};
  c.moe_layer_freq_is_list = true;
  EXPECT_EQ(ErrorOf(c), "model.moe_layer_freq: Invalid moe_layer_freq length: expected 4, got 2");
  c.moe_layer_freq = {0};
  c.moe_layer_freq_is_list = false;
  EXPECT_EQ(ErrorOf(c), "model.moe_layer_freq: moe_layer_freq must be positive");
  c.num_moe_experts = std::nullopt;  // without experts the frequency is never read
  EXPECT_EQ(ErrorOf(c), "(no error)");
}

TEST(BridgeFormulaTest, NonPositiveSizeErrors) {
  Config c = BaseConfig();
  c.tensor_model_parallel_size = 0;
  EXPECT_EQ(ErrorOf(c),
            "model.tensor_model_parallel_size: tensor_model_parallel_size must be "
            "positive");
  c = BaseConfig();
  c.expert_tensor_parallel_size = -1;
  EXPECT_EQ(ErrorOf(c),
            "model.expert_tensor_parallel_size: expert_tensor_parallel_size must be "
            "positive");
  c = BaseConfig();
  c.data_parallel_size = 0;
  EXPECT_EQ(ErrorOf(c), "memtune.world_size: data_parallel_size must be positive");
  c = BaseConfig();
  c.num_layers = 0;
  EXPECT_EQ(ErrorOf(c), "model.num_layers: num_layers must be positive");
  c = BaseConfig();
  c.moe_shared_expert_intermediate_size = -8;
  EXPECT_EQ(ErrorOf(c),
            "model.moe_shared_expert_intermediate_size: "
            "moe_shared_expert_intermediate_size must be non-negative");
  c = BaseConfig();
  c.should_pad_vocab = true;
  c.make_vocab_size_divisible_by = 0;
  EXPECT_EQ(ErrorOf(c),
            "model.make_vocab_size_divisible_by: make_vocab_size_divisible_by must "
            "be positive, got 0");
}

TEST(BridgeFormulaTest, VocabPaddingUsesDivisorTimesTp) {
  Config c = BaseConfig();
  c.vocab_size = 33;
  c.make_vocab_size_divisible_by = 4;
  c.should_pad_vocab = true;  // pads 33 to 40 (multiple of 4 * TP 2)
  const double padded = Estimate(c).total_parameters;
  c.should_pad_vocab = false;
  EXPECT_EQ(padded - Estimate(c).total_parameters, 16 * 7);
}

}  // namespace
}  // namespace memtune::estimate::bridge
