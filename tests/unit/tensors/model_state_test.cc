// Model state per rank: dtypes, gradient buffers, optimizer sharding, PEFT, FSDP.
#include "tensors/model_state.h"

#include <gtest/gtest.h>

#include <initializer_list>

#include "unit/estimate/test_jobs.h"

namespace memtune::tensors {
namespace {

using estimate::ModelChunk;
using estimate::StageLayout;
using estimate::testing::TinyJob;

// A stage of chunks (built by hand: the pipeline layout is the estimator's, not tested here).
StageLayout Stage(std::initializer_list<ModelChunk> chunks) {
  StageLayout stage;
  stage.chunks = chunks;
  return stage;
}

// The model state of a job without pipeline parallelism: one stage with every layer.
ModelStateBytes StateOf(const model::Job& job, bool transpose = true) {
  const ModelChunk all{0,    0,    static_cast<int>(job.model.num_layers),
                       true, true, static_cast<int>(job.model.mtp_num_layers.value_or(0))};
  const auto params = CountRankParams(job, MakeParamCatalog(job), Stage({all}), 1);
  return ComputeModelState(job, params, transpose);
}

std::int64_t Params(const model::Job& job) {
  return model::CountParameters(job.model, model::PaddedVocabSize(job));
}

TEST(ModelStateTest, Bf16AdamWithoutDistributedOptimizerIs18BytesPerParam) {
  const auto job = TinyJob();
  const auto s = StateOf(job);
  EXPECT_EQ(s.params_hp, 2 * Params(job));
  EXPECT_EQ(s.grads, 4 * Params(job));
  EXPECT_EQ(s.main_params + s.exp_avg + s.exp_avg_sq, 12 * Params(job));
  EXPECT_EQ(s.Total(), 18 * Params(job));
  EXPECT_EQ(s.step_transient, 0);  // fp32 grads: .float() is a no-op
}

TEST(ModelStateTest, Bf16GradsMakeAnOptimizerStepCopy) {
  auto job = TinyJob();
  job.ddp.grad_reduce_in_fp32 = false;
  const auto s = StateOf(job);
  EXPECT_EQ(s.grads, 2 * Params(job));
  EXPECT_EQ(s.step_transient, 4 * Params(job));
}

TEST(ModelStateTest, DistributedOptimizerShardsOverDataAndContextParallel) {
  auto job = TinyJob();
  job.memtune.world_size = 8;
  job.model.context_parallel_size = 2;
  job.optimizer.use_distributed_optimizer = true;
  const auto s = StateOf(job);
  EXPECT_EQ(s.main_params, 4 * Params(job) / 8);
  EXPECT_EQ(s.exp_avg_sq, 4 * Params(job) / 8);
  job.ddp.num_distributed_optimizer_instances = 2;
  EXPECT_EQ(StateOf(job).main_params, 4 * Params(job) / 4);
}

TEST(ModelStateTest, Fp8ParamsStoreLinearWeightsInOneByteWithHopperTranspose) {
  auto job = TinyJob();
  job.model.fp8 = model::Fp8Format::kHybrid;
  job.model.fp8_recipe = model::Fp8Recipe::kTensorwise;
  job.model.fp8_param = job.model.fp8_param_gather = true;
  const auto s = StateOf(job);
  // Linear weights per layer: qkv 8x24 + proj 8x8 + fc1 8x32 + fc2 16x8 = 640; 2 layers.
  EXPECT_EQ(s.params_fp8, 1280);
  EXPECT_EQ(s.fp8_transpose, 1280);
  EXPECT_EQ(s.params_hp, 2 * (Params(job) - 1280));
  EXPECT_EQ(StateOf(job, false).fp8_transpose, 0);  // Blackwell: no transpose
}

TEST(ModelStateTest, Fp8WithoutFp8ParamsCachesQuantizedWeights) {
  auto job = TinyJob();
  job.model.fp8 = model::Fp8Format::kHybrid;
  const auto s = StateOf(job);
  EXPECT_EQ(s.params_fp8, 0);
  EXPECT_EQ(s.fp8_transpose, 2 * 1280);
}

TEST(ModelStateTest, PrecisionAwareOptimizerDtypesAndSgd) {
  auto job = TinyJob();
  job.optimizer.use_precision_aware_optimizer = true;
  job.optimizer.exp_avg_dtype = model::Dtype::kBf16;
  job.optimizer.exp_avg_sq_dtype = model::Dtype::kBf16;
  EXPECT_EQ(StateOf(job).exp_avg, 2 * Params(job));
  job = TinyJob();
  job.optimizer.optimizer = model::Optimizer::kSgd;
  const auto s = StateOf(job);
  EXPECT_EQ(s.exp_avg + s.exp_avg_sq, 0);
  EXPECT_EQ(s.main_params, 4 * Params(job));
}

TEST(ModelStateTest, PeftFrozenBaseHasNoGradientsOrOptimizerState) {
  auto job = TinyJob();
  job.peft = model::PeftConfig{};
  job.peft->dim = 2;
  job.peft->target_modules = {"linear_qkv"};
  const auto s = StateOf(job);
  const std::int64_t adapters = 2 * 2 * (8 + 24);  // 2 layers * dim * (in + out)
  EXPECT_EQ(s.params_hp, 2 * (Params(job) + adapters));
  EXPECT_EQ(s.grads, 4 * adapters);
  EXPECT_EQ(s.main_params, 4 * adapters);
}

// Bridge peft/lora.py on MoE layers: the experts' grouped linears get expert adapters (one
// per rank shared by its local experts, or one per expert), the shared expert's linears
// ordinary ones; rank dim / topk with normalize_moe_lora.
TEST(ModelStateTest, LoraOnMoeLayersCountsExpertAndSharedExpertAdapters) {
  auto job = TinyJob();
  job.model.num_moe_experts = 4;
  job.model.moe_router_topk = 2;
  job.model.moe_ffn_hidden_size = 8;
  job.peft = model::PeftConfig{};
  job.peft->dim = 2;
  job.peft->target_modules = {"linear_fc1", "linear_fc2"};
  auto catalog = MakeParamCatalog(job);
  // fc1: dim * (h 8 + 2 * f_e 16), fc2: dim * (f_e 8 + h 8).
  EXPECT_EQ(catalog.lora_expert[1], 2 * (8 + 16) + 2 * (8 + 8));
  EXPECT_EQ(catalog.lora[1], 0);
  EXPECT_EQ(catalog.lora[0], 2 * (8 + 32) + 2 * (16 + 8));  // dense layers: f 16
  job.peft->share_expert_adapters = false;  // one adapter per local expert (EP 1: 4)
  EXPECT_EQ(MakeParamCatalog(job).lora_expert[1], 4 * (2 * (8 + 16) + 2 * (8 + 8)));
  job.peft->share_expert_adapters = true;
  job.peft->experts_shared_outer_loras = true;  // fc1 A and fc2 B shared, the rest per expert
  EXPECT_EQ(MakeParamCatalog(job).lora_expert[1], 2 * 8 + 4 * 2 * 16 + 4 * 2 * 8 + 2 * 8);
  job.peft->experts_shared_outer_loras = false;
  job.peft->dim = 4;
  job.peft->normalize_moe_lora = true;  // experts at rank 2, the shared expert at 4
  job.model.moe_shared_expert_intermediate_size = 4;
  catalog = MakeParamCatalog(job);
  EXPECT_EQ(catalog.lora_expert[1], 2 * (8 + 16) + 2 * (8 + 8));
  EXPECT_EQ(catalog.lora[1], 4 * (8 + 8) + 4 * (4 + 8));
  // Expert adapters are expert parameters: with EP 2 each rank has its own.
  job.model.expert_model_parallel_size = 2;
  job.memtune.world_size = 2;
  const ModelChunk all{0, 0, 2, true, true, 0};
  const auto params = CountRankParams(job, MakeParamCatalog(job), Stage({all}), 1);
  EXPECT_EQ(params.expert_hp, 2 * (2 * (8 + 16) + 2 * (8 + 8)));
}

TEST(ModelStateTest, OptimizerCpuOffloadMovesTheFractionOffGpu) {
  auto job = TinyJob();
  job.optimizer.optimizer_cpu_offload = true;
  job.optimizer.optimizer_offload_fraction = 0.5;
  EXPECT_EQ(StateOf(job).exp_avg, 2 * Params(job));
}

TEST(ModelStateTest, MegatronFsdpStrategiesShardMoreState) {
  auto job = TinyJob();
  job.memtune.world_size = 4;
  job.ddp.use_megatron_fsdp = true;
  job.ddp.data_parallel_sharding_strategy = model::ShardingStrategy::kOptim;
  auto s = StateOf(job);
  EXPECT_EQ(s.grads, 4 * Params(job));
  EXPECT_EQ(s.main_params, Params(job));
  job.ddp.data_parallel_sharding_strategy = model::ShardingStrategy::kOptimGrads;
  EXPECT_EQ(StateOf(job).grads, Params(job));
  job.ddp.data_parallel_sharding_strategy = model::ShardingStrategy::kOptimGradsParams;
  s = StateOf(job);
  EXPECT_EQ(s.params_hp, 2 * Params(job) / 4);
  EXPECT_GT(s.fsdp_gather, 0);
}

TEST(ModelStateTest, TiedEmbeddingsWithPipelineKeepACopyOnTheLastStage) {
  auto job = TinyJob();
  job.model.share_embeddings_and_output_weights = true;
  job.model.pipeline_model_parallel_size = 2;
  const auto catalog = MakeParamCatalog(job);  // layer 0 on stage 0, layer 1 on stage 1
  const auto first = CountRankParams(job, catalog, Stage({{0, 0, 1, true, false, 0}}), 2);
  const auto last = CountRankParams(job, catalog, Stage({{0, 1, 1, false, true, 0}}), 2);
  EXPECT_EQ(first.dense_hp + first.dense_fp8, last.dense_hp + last.dense_fp8 - 8);  // + final norm
}

}  // namespace
}  // namespace memtune::tensors
