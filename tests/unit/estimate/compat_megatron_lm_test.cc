// Megatron-LM estimator: upstream's conformance vectors (megatron.md §2.6, from Megatron-LM
// tests/unit_tests/training/test_weight_and_optimizer_memory.py), both activation formulas,
// the job mapping, and error texts.
#include <gtest/gtest.h>

#include <string>

#include "estimate/megatron_lm_formula.h"
#include "memtune/estimate/compat.h"

namespace memtune::estimate::mlm {
namespace {

// Upstream _make_args(): no bias, DP 16, EP 2, ETP 4, f 16, no GQA, h 8, d 4, f_e 16,
// moe_layer_freq [0, 1], top-1, f_sh 8, RMSNorm, a 2, E 4, L 2, V 32, PP 1, TP 2, tied,
// distributed optimizer, world 32.
Args BaseArgs() {
  Args a;
  a.add_bias_linear = false;
  a.data_parallel_size = 16;
  a.expert_model_parallel_size = 2;
  a.expert_tensor_parallel_size = 4;
  a.ffn_hidden_size = 16;
  a.hidden_size = 8;
  a.kv_channels = 4;
  a.moe_ffn_hidden_size = 16;
  a.moe_layer_freq = {0, 1};
  a.moe_layer_freq_is_list = true;
  a.moe_router_topk = 1;
  a.moe_shared_expert_intermediate_size = 8;
  a.rms_norm = true;
  a.num_attention_heads = 2;
  a.num_query_groups = 2;
  a.num_experts = 4;
  a.num_layers = 2;
  a.padded_vocab_size = 32;
  a.tensor_model_parallel_size = 2;
  a.use_distributed_optimizer = true;
  a.world_size = 32;
  return a;
}

double Weights(const Args& a) {
  auto r = ComputeWeightAndOptimizerMemory(a);
  EXPECT_TRUE(r.has_value()) << r.error().Describe();
  return r.has_value() ? r->weight_and_optimizer_bytes : -1;
}

TEST(MegatronLmFormulaTest, BaseVector) {
  auto w = ComputeWeightAndOptimizerMemory(BaseArgs());
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->tp_sharded_on_most_loaded, 576);      // (256 + 256 + 256 + 128 + 256) / 2
  EXPECT_EQ(w->replicated_on_most_loaded, 72);       // 16 + (16 + 32) + 8
  EXPECT_EQ(w->expert_sharded_on_most_loaded, 128);  // 1024 / (4 * 2)
  EXPECT_EQ(w->dense_bytes_per_parameter, 6.75);
  EXPECT_EQ(w->expert_bytes_per_parameter, 9);  // EDP = 32 // (4 * 2 * 1) = 4
  EXPECT_EQ(w->weight_and_optimizer_bytes, 5526);
  EXPECT_FALSE(w->parameters_on_other_shards.has_value());
}

TEST(MegatronLmFormulaTest, AccountsForExpertParallelism) {
  Args a = BaseArgs();
  a.pipeline_model_parallel_size = 2;
  a.world_size = 64;
  auto w = ComputeWeightAndOptimizerMemory(a);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->tp_sharded_on_most_loaded, ((256 + 256 + 256 + 128) / 2.0 + 256) / 2);  // 352
  EXPECT_EQ(w->replicated_on_most_loaded, (16 + 16 + 32 + 8) / 2.0);                   // 36
  EXPECT_EQ(w->expert_sharded_on_most_loaded, 1024 / 2.0 / (4 * 2));                   // 64
  EXPECT_EQ(w->weight_and_optimizer_bytes, 3195);  // (352 + 36) * 6.75 + 64 * 9
  ASSERT_TRUE(w->parameters_on_other_shards.has_value());
  EXPECT_EQ(*w->parameters_on_other_shards, 896 / 4.0 + 72 / 2.0 + 1024 / 16.0);
}

TEST(MegatronLmFormulaTest, AccountsForLatentMoeExperts) {
  Args a = BaseArgs();
  a.moe_latent_size = 4;
  auto w = ComputeWeightAndOptimizerMemory(a);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->tp_sharded_on_most_loaded, ((256 + 256) + (256 + 128) + 256) / 2.0);  // 576
  EXPECT_EQ(w->replicated_on_most_loaded, 16 + (16 + 64 + 32) + 8);                  // 136
  EXPECT_EQ(w->expert_sharded_on_most_loaded, 512 / (4 * 2));
  EXPECT_EQ(w->weight_and_optimizer_bytes, 5382);  // (576 + 136) * 6.75 + 64 * 9
}

TEST(MegatronLmFormulaTest, DecreasesWithTensorParallelism) {
  double previous = 0;
  for (int tp : {1, 2, 4}) {
    Args a = BaseArgs();
    a.expert_model_parallel_size = 1;
    a.expert_tensor_parallel_size = 1;
    a.tensor_model_parallel_size = tp;
    a.use_distributed_optimizer = false;
    a.world_size = 16 * tp;
    const double w = Weights(a);
    if (tp > 1) {
      EXPECT_LT(w, previous) << "tp " << tp;
    }
    previous = w;
  }
}

TEST(MegatronLmFormulaTest, DecreasesWithExpertParallelism) {
  double previous = 0;
  bool first = true;
  for (auto [ep, etp] : {std::pair{1, 1}, {2, 1}, {2, 2}, {4, 2}}) {
    Args a = BaseArgs();
    a.expert_model_parallel_size = ep;
    a.expert_tensor_parallel_size = etp;
    const double w = Weights(a);
    if (!first) {
      EXPECT_LT(w, previous) << "ep " << ep << " etp " << etp;
    }
    previous = w;
    first = false;
  }
}

TEST(MegatronLmFormulaTest, SwigluNormsBiasGateAndMtp) {
  Args a = BaseArgs();
  const double base = Weights(a);
  a.rms_norm = false;  // LayerNorm: weight + bias, replicated
  EXPECT_EQ(Weights(a) - base, (16 + 16 + 8) * 6.75);
  a = BaseArgs();
  a.add_bias_linear = true;  // router bias: E per MoE layer
  EXPECT_EQ(Weights(a) - base, 4 * 6.75);
  a = BaseArgs();
  a.moe_shared_expert_gate = true;  // h per MoE layer
  EXPECT_EQ(Weights(a) - base, 8 * 6.75);
  a = BaseArgs();
  a.mtp_num_layers = 1;  // whole MTP block (a copy of the last, MoE, layer) on stage 0
  auto w = ComputeWeightAndOptimizerMemory(a);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->mtp_block_parameters, 256 + 128 + 1024 + 16 + 32);
  EXPECT_EQ(w->weight_and_optimizer_bytes - base, ((256 + 128) / 2.0 + 48) * 6.75 + 128 * 9);
  a = BaseArgs();
  a.swiglu = true;  // x1.5 on dense, shared and routed MLPs
  w = ComputeWeightAndOptimizerMemory(a);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->tp_sharded_on_most_loaded, (256 + 384 + 256 + 192 + 256) / 2.0);
  EXPECT_EQ(w->expert_sharded_on_most_loaded, 1536 / 8.0);
}

TEST(MegatronLmFormulaTest, MultiLatentAttention) {
  Args a = BaseArgs();
  a.num_experts = std::nullopt;
  a.multi_latent_attention = true;
  a.kv_lora_rank = 4;
  a.qk_head_dim = 2;
  a.qk_pos_emb_head_dim = 1;
  a.v_head_dim = 3;
  auto w = ComputeWeightAndOptimizerMemory(a);
  ASSERT_TRUE(w.has_value());
  // q: 8*2*(2+1) = 48; kv: 4*(8 + 2*(2+3) + 1) = 76; rope k: 8*1; o: 2*3*8 = 48 -> 180.
  // Two dense layers (180 + 256 + 16) + final norm 8 + embedding 256.
  EXPECT_EQ(w->total_parameters, 2 * (180 + 256 + 16) + 8 + 256);
  a.q_lora_rank = 5;  // q: 5*(8 + 2*3 + 1) = 75
  w = ComputeWeightAndOptimizerMemory(a);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->total_parameters, 2 * (207 + 256 + 16) + 8 + 256);
  a.group_query_attention = true;
  a.num_query_groups = 1;
  auto bad = ComputeWeightAndOptimizerMemory(a);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message,
            "multi_latent_attention requires group_query_attention off (num_query_groups must "
            "equal num_attention_heads)");
}

TEST(MegatronLmFormulaTest, MoeLayerPatternErrors) {
  Args a = BaseArgs();
  a.moe_layer_freq = {0, 1, 1};
  auto bad = ComputeWeightAndOptimizerMemory(a);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().Describe(),
            "model.moe_layer_freq: Invalid length of moe_layer_pattern: 3, expected 2, current "
            "moe layer pattern: [0, 1, 1]");
  a.moe_layer_freq = {0};
  a.moe_layer_freq_is_list = false;
  bad = ComputeWeightAndOptimizerMemory(a);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message, "moe_layer_freq must be positive");
  a.moe_layer_freq = {2};  // int frequency 2: layer 0 is MoE, layer 1 dense
  EXPECT_EQ(Weights(a), Weights([] {
              Args b = BaseArgs();
              b.moe_layer_freq = {1, 0};
              return b;
            }()));
}

// Activation: s 8, b 2, h 16, f 64, L 4, TP 2, V 32 (the Bridge base shape).
Args ActivationArgs() {
  Args a = BaseArgs();
  a.seq_length = 8;
  a.micro_batch_size = 2;
  a.hidden_size = 16;
  a.ffn_hidden_size = 64;
  a.num_layers = 4;
  a.num_experts = std::nullopt;
  a.pipeline_model_parallel_size = 2;
  return a;
}

TEST(MegatronLmFormulaTest, ActivationFormulas) {
  Args a = ActivationArgs();
  EXPECT_EQ(ComputeActivationMemory(a, 4), 17792);  // same as Bridge's base vector
  EXPECT_EQ(ComputeActivationMemory(a, 1), 8896);
  // without_sp: 256*(10 + 12)*4 + 256 + 512 = 23296, x1.05.
  EXPECT_DOUBLE_EQ(ComputeActivationMemoryWithoutSp(a, 4), 23296 * 1.05);
  a.pipeline_model_parallel_size = 1;
  // SP, PP 1: (256*34*4 + 128 + 256 + 256*4*(1 + 32/16)) / 2
  EXPECT_EQ(ComputeActivationMemory(a, 4), (34816 + 128 + 256 + 3072) / 2.0);
  // without_sp, PP 1: (22528 + 128 + 256 + 2*(8*2*32/2 + 256)) * 1.05
  EXPECT_DOUBLE_EQ(ComputeActivationMemoryWithoutSp(a, 4), (22912 + 2 * (256 + 256)) * 1.05);
}

TEST(MegatronLmFormulaTest, ReportChoosesTheFormulaAndPrints) {
  Args a = ActivationArgs();
  a.sequence_parallel = true;
  a.recompute_selective = true;
  auto r = ReportTheoreticalMemory(a, 4);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->with_sp);
  EXPECT_EQ(r->activation_bytes, 17792);
  ASSERT_EQ(r->lines.size(), 2u);
  EXPECT_EQ(r->lines[0], "compute_activation_memory with SP");
  a.recompute_selective = false;  // full or no recompute: without_sp
  r = ReportTheoreticalMemory(a, 4);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->with_sp);
  EXPECT_EQ(r->lines[0], "compute_activation_memory_without_sp");
  EXPECT_EQ(r->total_bytes, r->weights.weight_and_optimizer_bytes + r->activation_bytes);
}

// The job mapping: the base vector expressed as a job gives the same 5,526 bytes.
model::Job BaseJob() {
  model::Job job;
  model::ModelConfig& m = job.model;
  m.num_layers = 2;
  m.hidden_size = 8;
  m.ffn_hidden_size = 16;
  m.num_attention_heads = 2;
  m.num_query_groups = 2;
  m.kv_channels = 4;
  m.vocab_size = 32;
  m.make_vocab_size_divisible_by = 16;  // x TP 2 = 32: no padding
  m.normalization = model::Normalization::kRMSNorm;
  m.add_bias_linear = false;
  m.num_moe_experts = 4;
  m.moe_ffn_hidden_size = 16;
  m.moe_shared_expert_intermediate_size = 8;
  m.moe_layer_freq = {0, 1};
  m.moe_layer_freq_is_list = true;
  m.moe_router_topk = 1;
  m.tensor_model_parallel_size = 2;
  m.expert_model_parallel_size = 2;
  m.expert_tensor_parallel_size = 4;
  m.seq_length = 8;
  job.optimizer.use_distributed_optimizer = true;
  job.memtune.world_size = 32;
  return job;
}

TEST(MegatronLmJobTest, MapsTheJobOntoUpstreamArguments) {
  auto args = ArgsFromJob(BaseJob());
  ASSERT_TRUE(args.has_value());
  EXPECT_EQ(args->data_parallel_size, 16);
  EXPECT_FALSE(args->group_query_attention);
  EXPECT_EQ(Weights(*args), 5526);
  model::Job job = BaseJob();
  job.model.make_vocab_size_divisible_by = 128;  // MLM always pads: 256 = 128 * TP
  job.model.sequence_parallel = true;
  job.model.tensor_model_parallel_size = 1;
  job.model.num_query_groups = 1;
  args = ArgsFromJob(job);
  ASSERT_TRUE(args.has_value());
  EXPECT_EQ(args->padded_vocab_size, 128);
  EXPECT_FALSE(args->sequence_parallel);  // arguments.py: no SP with TP 1
  EXPECT_TRUE(args->group_query_attention);
  EXPECT_EQ(args->data_parallel_size, 32);
}

// memtune.versions.megatron_core < 0.16: theoretical_memory_usage.py before 9ad59065 counted
// every norm as weight + bias (2 per element) and the MLA q/kv norms as 1, so an RMSNorm
// model has h * (2L + 1) parameters more (2h per layer, h in the final norm).
TEST(MegatronLmJobTest, MegatronCoreBefore016CountsNormsAsLayerNorm) {
  model::Job job = BaseJob();
  job.model.num_moe_experts.reset();
  auto newest = ArgsFromJob(job);
  ASSERT_TRUE(newest.has_value());
  EXPECT_FALSE(newest->legacy_norm_count);
  for (const char* version : {"0.16", "0.16.0", "0.19.0", "1.0"}) {
    job.memtune.versions.megatron_core = version;
    EXPECT_FALSE(ArgsFromJob(job)->legacy_norm_count) << version;
  }
  for (const char* version : {"0.15.3", "0.15", "0.9.0"}) {
    job.memtune.versions.megatron_core = version;
    EXPECT_TRUE(ArgsFromJob(job)->legacy_norm_count) << version;
  }
  auto legacy = ArgsFromJob(job);
  const auto before = ComputeWeightAndOptimizerMemory(*legacy);
  const auto after = ComputeWeightAndOptimizerMemory(*newest);
  ASSERT_TRUE(before.has_value() && after.has_value());
  EXPECT_EQ(before->total_parameters - after->total_parameters, 8 * (2 * 2 + 1));
  // LayerNorm already counted weight + bias: the two versions agree.
  job.model.normalization = model::Normalization::kLayerNorm;
  const auto layer_norm_legacy = ComputeWeightAndOptimizerMemory(*ArgsFromJob(job));
  job.memtune.versions.megatron_core = "";
  const auto layer_norm_newest = ComputeWeightAndOptimizerMemory(*ArgsFromJob(job));
  EXPECT_EQ(layer_norm_legacy->total_parameters, layer_norm_newest->total_parameters);
}

TEST(MegatronLmJobTest, EstimateFillsTheReport) {
  model::Job job = BaseJob();
  job.model.recompute_granularity = model::RecomputeGranularity::kSelective;
  job.model.sequence_parallel = true;
  auto e = EstimateMegatronLm(job, {.mode = Mode::kMegatronLm, .num_microbatches = 1});
  ASSERT_TRUE(e.has_value()) << e.error().Describe();
  EXPECT_EQ(e->mode, Mode::kMegatronLm);
  ASSERT_EQ(e->ranks.size(), 1u);
  const RankEstimate& rank = e->ranks[0];
  ASSERT_EQ(rank.components.size(), 2u);
  EXPECT_EQ(rank.components[0].name, "weight and optimizer");
  EXPECT_EQ(rank.components[0].bytes, 5526);
  EXPECT_EQ(rank.dense_bytes, 4374);
  EXPECT_EQ(rank.expert_bytes, 1152);
  // (8*1*8*(18 + 4*2)*2 + 8*8 + 64 + 8*8*4*(1 + 32/8)) / 2 = (3328 + 128 + 1280) / 2
  EXPECT_EQ(rank.components[1].name, "activation");
  EXPECT_EQ(rank.activation_bytes, 2368);
  EXPECT_EQ(e->peak_allocated_bytes, 5526 + 2368);
  EXPECT_EQ(e->upstream_lines.back(),
            "Theoretical memory footprints: weight and optimizer=0.01 MB, activation=0.00 MB, "
            "total=0.01 MB");
}

TEST(MegatronLmJobTest, NonPositiveSizesAreErrors) {
  model::Job job = BaseJob();
  job.model.expert_model_parallel_size = 0;
  auto e = EstimateMegatronLm(job, {});
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error().Describe(),
            "model.expert_model_parallel_size: expert_model_parallel_size must be positive");
  EXPECT_EQ(e.error().hint, "got 0");
  job = BaseJob();
  job.model.vocab_size = 0;
  e = EstimateMegatronLm(job, {});
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error().Describe(), "model.vocab_size: vocab_size must be positive, got 0");
}

}  // namespace
}  // namespace memtune::estimate::mlm
