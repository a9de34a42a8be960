// Both compat modes on real model shapes: the Llama3-70B worked example (megatron.md §3.1,
// §3.2: numbers from running the upstream files) and the canonical-recipe table (§5.3).
#include <gtest/gtest.h>

#include <string>

#include "estimate/bridge_formula.h"
#include "estimate/compat_common.h"
#include "estimate/megatron_lm_formula.h"
#include "memtune/estimate/compat.h"
#include "unit/support/llama3_70b_shape.h"

namespace memtune::estimate {
namespace {

// Llama3-70B, Bridge perf recipe llama3_70b_sft_32gpu_h100_fp8cs_config: TP4 PP4 VPP5,
// DP 2 (32 GPUs), MBS 1, GBS 32 (16 micro-batches), seq 4096, SP on, recompute none,
// distributed optimizer, vocab 128256 padded to 128512.
model::Job Llama70B() {
  model::Job job;
  memtune::testing::SetLlama3_70bShape(job);
  job.model.make_vocab_size_divisible_by = 128;
  job.model.should_pad_vocab = true;
  return job;
}

Estimate RunMode(const model::Job& job, Mode mode) {
  EstimateOptions options;
  options.mode = mode;
  auto e = mode == Mode::kBridge ? EstimateBridge(job, options) : EstimateMegatronLm(job, options);
  EXPECT_TRUE(e.has_value()) << e.error().Describe();
  return e.has_value() ? *e : Estimate{};
}

TEST(WorkedExampleTest, MegatronLmParameterCounts) {
  auto args = mlm::ArgsFromJob(Llama70B());
  ASSERT_TRUE(args.has_value());
  EXPECT_EQ(args->padded_vocab_size, 128512);
  auto w = mlm::ComputeWeightAndOptimizerMemory(*args);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->transformer_block_parameters, 68'452'360'192);
  EXPECT_EQ(w->embedding_parameters, 2'105'540'608);
  EXPECT_EQ(w->total_parameters, 70'557'900'800);
  EXPECT_EQ(w->tp_sharded_on_most_loaded, 4'541'382'656);
  EXPECT_EQ(w->replicated_on_most_loaded, 329'728);
  EXPECT_EQ(w->parameters_on_most_loaded_shard, 4'541'712'384);
  EXPECT_EQ(w->parameters_on_other_shards.value_or(0), 4'278'519'808);
  EXPECT_EQ(w->dense_bytes_per_parameter, 12);
  EXPECT_EQ(w->weight_and_optimizer_bytes, 54'500'548'608);
}

TEST(WorkedExampleTest, MegatronLmSpAndSelective) {
  model::Job job = Llama70B();
  job.model.recompute_granularity = model::RecomputeGranularity::kSelective;
  const Estimate e = RunMode(job, Mode::kMegatronLm);
  ASSERT_EQ(e.ranks.size(), 1u);
  EXPECT_EQ(e.ranks[0].components[0].bytes, 54'500'548'608);
  EXPECT_EQ(e.ranks[0].activation_bytes, 24'734'687'232);
  EXPECT_EQ(e.peak_allocated_bytes, 79'235'235'840);
  EXPECT_EQ(e.ranks[0].in_flight_microbatches, 5);  // ceil(1.15 * 4)
  EXPECT_EQ(e.ranks[0].layers, 20);
  EXPECT_EQ(e.upstream_lines,
            (std::vector<std::string>{"compute_activation_memory with SP",
                                      "Theoretical memory footprints: weight and optimizer="
                                      "51975.77 MB, activation=23588.84 MB, total=75564.61 MB"}));
}

TEST(WorkedExampleTest, MegatronLmWithoutSpAsTheRecipeRuns) {
  const Estimate e = RunMode(Llama70B(), Mode::kMegatronLm);  // recompute none -> without_sp
  EXPECT_EQ(e.ranks[0].model_state_bytes, 54'500'548'608);
  EXPECT_EQ(e.ranks[0].activation_bytes, 52'023'956'275);  // 52,023,956,275.2 upstream
  EXPECT_EQ(e.peak_allocated_bytes, 106'524'504'883);
  EXPECT_EQ(e.upstream_lines,
            (std::vector<std::string>{"compute_activation_memory_without_sp",
                                      "Theoretical memory footprints: weight and optimizer="
                                      "51975.77 MB, activation=49613.91 MB, total=101589.68 MB"}));
  auto args = mlm::ArgsFromJob(Llama70B());
  ASSERT_TRUE(args.has_value());
  args->pipeline_model_parallel_size = 1;  // per-layer term check: s*b*h*(10 + 24/4)
  args->virtual_pipeline_model_parallel_size = std::nullopt;
  args->num_layers = 1;
  EXPECT_NEAR(mlm::ComputeActivationMemoryWithoutSp(*args, 1) / 1.05,
              536'870'912 + 8 * 4096 + 4096 * 8192 + 2 * (4096.0 * 128512 / 4 + 4096 * 8192), 1e-3);
}

TEST(WorkedExampleTest, BridgePaddedVocabulary) {
  const bridge::Config config = bridge::ConfigFromJob(Llama70B());
  auto counts = bridge::CountParameters(config);
  ASSERT_TRUE(counts.has_value());
  EXPECT_EQ(counts->dense_transformer, 68'453'679'104);
  EXPECT_EQ(counts->embeddings, 2'105'540'608);
  auto e = bridge::EstimateTrainingMemory(config, 16, true);
  ASSERT_TRUE(e.has_value());
  const bridge::Component& dense = e->model_state_components.at(0);
  EXPECT_EQ(dense.parameter_count, 70'559'219'712);
  EXPECT_EQ(dense.parameter_count_per_gpu, 4'541'547'520);
  EXPECT_EQ(dense.bytes_per_parameter, 12);
  EXPECT_EQ(dense.memory_bytes, 54'498'570'240);
  EXPECT_EQ(e->model_state_components.size(), 1u);
  // Upstream's float is 24734687231.999996 (x1.15 is inexact); memtune rounds to nearest.
  EXPECT_LT(e->activation->memory_bytes, 24'734'687'232.0);
  EXPECT_EQ(compat::RoundToBytes(e->activation->memory_bytes), 24'734'687'232);
  EXPECT_EQ(e->TotalMemoryBytes(), 79'233'257'472);
  EXPECT_EQ(*bridge::FormatTrainingMemoryEstimate(*e, "GB"),
            "Theoretical memory footprints: dense parameters and optimizer=50.76 GB, "
            "activation=23.04 GB, total=73.79 GB");

  const Estimate est = RunMode(Llama70B(), Mode::kBridge);
  EXPECT_EQ(est.peak_allocated_bytes, 79'233'257'472);
  EXPECT_EQ(est.ranks[0].dense_bytes, 54'498'570'240);
  EXPECT_EQ(est.ranks[0].components.size(), 2u);
  EXPECT_EQ(est.assumptions.size(), 5u);  // memtune's commit line + upstream's four
  // The recipe has no recompute, so Bridge prints the weight line only.
  EXPECT_EQ(est.upstream_lines,
            (std::vector<std::string>{
                "Theoretical memory footprints: weight and optimizer=51973.89 MB"}));
  model::Job selective = Llama70B();
  selective.model.recompute_granularity = model::RecomputeGranularity::kSelective;
  EXPECT_EQ(RunMode(selective, Mode::kBridge).upstream_lines.at(0),
            "Theoretical memory footprints: weight and optimizer=51973.89 MB, "
            "activation=23588.84 MB, total=75562.72 MB");
}

TEST(WorkedExampleTest, BridgeUnpaddedVocabulary) {
  model::Job job = Llama70B();
  job.model.should_pad_vocab = false;  // canonical recipes
  auto e = bridge::EstimateTrainingMemory(bridge::ConfigFromJob(job), 16, true);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->model_state_components[0].parameter_count, 70'555'025'408);
  EXPECT_EQ(e->model_state_components[0].parameter_count_per_gpu, 4'541'023'232);
  EXPECT_EQ(e->model_state_components[0].memory_bytes, 54'492'278'784);
  EXPECT_EQ(e->TotalMemoryBytes(), 79'226'966'016);
  EXPECT_EQ(*bridge::FormatTrainingMemoryEstimate(*e, "GB"),
            "Theoretical memory footprints: dense parameters and optimizer=50.75 GB, "
            "activation=23.04 GB, total=73.79 GB");
  EXPECT_EQ(*bridge::FormatTrainingMemoryEstimate(*e, "MB"),
            "Theoretical memory footprints: dense parameters and optimizer=51967.89 MB, "
            "activation=23588.84 MB, total=75556.72 MB");
}

}  // namespace
}  // namespace memtune::estimate
