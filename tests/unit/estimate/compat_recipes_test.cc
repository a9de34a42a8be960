// Bridge mode on the canonical recipes of megatron.md §5.3 (upstream estimator output in
// GiB, printed as "GB"; distributed optimizer effective values applied).
#include <gtest/gtest.h>

#include <string>

#include "estimate/bridge_formula.h"
#include "memtune/estimate/compat.h"

namespace memtune::estimate::bridge {
namespace {

struct Layout {
  int tp = 1, pp = 1, ep = 1, cp = 1, world = 1;
  std::optional<int> vpp = std::nullopt;
  std::int64_t seq = 2048, gbs = 128;
  bool dist_opt = true;
};

model::Job WithLayout(model::Job job, const Layout& l) {
  model::ModelConfig& m = job.model;
  m.tensor_model_parallel_size = l.tp;
  m.pipeline_model_parallel_size = l.pp;
  m.virtual_pipeline_model_parallel_size = l.vpp;
  m.expert_model_parallel_size = l.ep;
  m.context_parallel_size = l.cp;
  m.seq_length = l.seq;
  job.train.micro_batch_size = 1;
  job.train.global_batch_size = l.gbs;
  job.optimizer.use_distributed_optimizer = l.dist_opt;
  job.memtune.world_size = l.world;
  return job;
}

model::Job Dense(std::int64_t layers, std::int64_t hidden, std::int64_t heads, std::int64_t groups,
                 std::int64_t ffn, std::int64_t vocab) {
  model::Job job;
  model::ModelConfig& m = job.model;
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = heads;
  m.num_query_groups = groups;
  m.kv_channels = 128;
  m.ffn_hidden_size = ffn;
  m.vocab_size = vocab;
  m.make_vocab_size_divisible_by = 128;
  m.should_pad_vocab = false;  // canonical recipes leave it False
  m.share_embeddings_and_output_weights = false;
  m.gated_linear_unit = true;
  m.activation_func = "silu";
  return job;
}

model::Job Qwen3_30B_A3B() {
  model::Job job = Dense(48, 2048, 32, 4, 6144, 151936);
  job.model.num_moe_experts = 128;
  job.model.moe_router_topk = 8;
  job.model.moe_ffn_hidden_size = 768;
  return job;
}

model::Job GptOss120B() {
  model::Job job = Dense(36, 2880, 64, 8, 2880, 201088);
  job.model.kv_channels = 64;
  job.model.activation_func = "quick_gelu";  // GLU, so upstream counts 2 projections
  job.model.num_moe_experts = 128;
  job.model.moe_router_topk = 4;
  job.model.moe_ffn_hidden_size = 2880;
  return job;
}

std::string FormatGb(const model::Job& job) {
  auto e = EstimateTrainingMemory(ConfigFromJob(job), model::NumMicrobatches(job), true);
  if (!e.has_value()) return e.error().Describe();
  return *FormatTrainingMemoryEstimate(*e, "GB");
}

constexpr char kPrefix[] = "Theoretical memory footprints: dense parameters and optimizer=";

TEST(CanonicalRecipesTest, Qwen3_8B_Sft) {
  const model::Job job = WithLayout(Dense(36, 4096, 32, 8, 12288, 151936), {.tp = 4, .world = 4});
  EXPECT_EQ(FormatGb(job), std::string(kPrefix) + "34.33 GB, activation=2.41 GB, total=36.74 GB");
}

TEST(CanonicalRecipesTest, Qwen3_30B_A3B_Sft) {
  model::Job job = WithLayout(Qwen3_30B_A3B(), {.tp = 4, .pp = 2, .ep = 4, .world = 8});
  job.model.expert_tensor_parallel_size = 1;
  EXPECT_EQ(FormatGb(job), std::string(kPrefix) +
                               "3.20 GB, routed expert parameters and optimizer=60.75 GB, "
                               "activation=1.41 GB, total=65.36 GB");
}

TEST(CanonicalRecipesTest, Qwen3_30B_A3B_EstimateSplitsRoutedExperts) {
  model::Job job = WithLayout(Qwen3_30B_A3B(), {.tp = 4, .pp = 2, .ep = 4, .world = 8});
  job.model.expert_tensor_parallel_size = 1;
  EstimateOptions options;
  options.mode = Mode::kBridge;
  auto e = EstimateBridge(job, options);
  ASSERT_TRUE(e.has_value()) << e.error().Describe();
  const RankEstimate& rank = e->ranks.at(0);
  ASSERT_EQ(rank.components.size(), 3u);
  EXPECT_EQ(rank.components[1].name, "routed expert parameters and optimizer");
  EXPECT_TRUE(rank.components[1].expert);
  EXPECT_FALSE(rank.components[0].expert);
  EXPECT_EQ(rank.expert_bytes, 3'623'878'656LL * 18);
  EXPECT_EQ(rank.dense_bytes, 191'087'104LL * 18);
  EXPECT_EQ(rank.activation_bytes, 1'512'054'784);
  EXPECT_EQ(e->peak_allocated_bytes, rank.dense_bytes + rank.expert_bytes + rank.activation_bytes);
  EXPECT_EQ(rank.layers, 24);
  EXPECT_EQ(rank.in_flight_microbatches, 2);
  EXPECT_EQ(e->assumptions.size(), 6u);  // memtune's commit line, + routed experts, + activation
}

TEST(CanonicalRecipesTest, GptOss120B_SftAsCoded) {
  const model::Job job = WithLayout(GptOss120B(), {.pp = 4, .ep = 8, .world = 32});
  EXPECT_EQ(FormatGb(job), std::string(kPrefix) +
                               "5.71 GB, routed expert parameters and optimizer=40.05 GB, "
                               "activation=6.75 GB, total=52.51 GB");
  auto e = EstimateTrainingMemory(ConfigFromJob(job), 16, true);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->total_parameters, 78'555'392'640);  // 1/3 of the experts missing (P = 2)
  EXPECT_EQ(e->model_state_components[1].bytes_per_parameter, 18);   // EDP 1
  EXPECT_EQ(e->model_state_components[0].bytes_per_parameter, 7.5);  // 6 + 12/8
}

TEST(CanonicalRecipesTest, GptOss120B_WithSiluCount) {
  model::Job job = WithLayout(GptOss120B(), {.pp = 4, .ep = 8, .world = 32});
  job.model.activation_func = "silu";
  EXPECT_EQ(FormatGb(job), std::string(kPrefix) +
                               "5.71 GB, routed expert parameters and optimizer=60.07 GB, "
                               "activation=6.75 GB, total=72.53 GB");
}

model::Job Llama70B() { return Dense(80, 8192, 64, 8, 28672, 128256); }

TEST(CanonicalRecipesTest, Llama3_70B_Sft) {
  const model::Job job =
      WithLayout(Llama70B(), {.tp = 8, .pp = 4, .world = 32, .seq = 4096, .gbs = 8});
  EXPECT_EQ(model::NumMicrobatches(job), 8);
  EXPECT_EQ(FormatGb(job), std::string(kPrefix) + "38.06 GB, activation=10.02 GB, total=48.08 GB");
}

TEST(CanonicalRecipesTest, Llama3_70B_Pretrain) {
  const model::Job job = WithLayout(
      Llama70B(), {.tp = 4, .pp = 4, .cp = 2, .world = 32, .vpp = 5, .seq = 8192, .gbs = 512});
  EXPECT_EQ(FormatGb(job), std::string(kPrefix) + "50.75 GB, activation=23.04 GB, total=73.79 GB");
}

TEST(CanonicalRecipesTest, Llama3_70B_PeftIgnoresLora) {
  model::Job job =
      WithLayout(Llama70B(), {.tp = 8, .world = 8, .seq = 4096, .gbs = 8, .dist_opt = false});
  job.peft = model::PeftConfig{};
  EXPECT_EQ(FormatGb(job),
            std::string(kPrefix) + "147.85 GB, activation=10.26 GB, total=158.11 GB");
}

}  // namespace
}  // namespace memtune::estimate::bridge
