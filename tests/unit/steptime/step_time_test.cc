// The step-time model on whole jobs (memtune/steptime/step_time.h).
#include "memtune/steptime/step_time.h"

#include <gtest/gtest.h>

#include <string>

#include "memtune/model/examples.h"
#include "memtune/model/job_parse.h"

namespace memtune::steptime {
namespace {

model::Job Parse(const std::string& yaml) {
  auto doc = model::ParseJobText(yaml);
  EXPECT_TRUE(doc.has_value()) << (doc ? "" : doc.error().Describe());
  return doc ? doc->job : model::Job{};
}

model::Job Example() {
  auto text = model::ExampleJobYaml("llama3-70b-32xh100");
  EXPECT_TRUE(text.has_value());
  return Parse(*text);
}

double Tps(const model::Job& job) {
  auto step = PredictStepTime(job);
  EXPECT_TRUE(step.has_value()) << (step ? "" : step.error().Describe());
  return step ? step->tokens_per_s_per_gpu : 0;
}

// GFLOP per token of the global batch, in both conventions.
double FlopsPerToken(const std::string& preset, int seq, FlopsFormula formula) {
  const model::Job job =
      Parse("model: {preset: " + preset + ", seq_length: " + std::to_string(seq) +
            "}\ntrain: {global_batch_size: 8}\nmemtune: {gpu: h100, world_size: 8}\n");
  auto step = PredictStepTime(job);
  EXPECT_TRUE(step.has_value());
  const double flops =
      formula == FlopsFormula::kCausal ? step->model_flops_causal : step->model_flops_noncausal;
  return flops / (8.0 * seq) / 1e9;
}

// Megatron-LM's num_floating_point_operations as Bridge's and NeMo's tables count it
// (throughput.md, "Checked on the public rows": 449.2 / 51.47 / 2,524 causal, 481.4 / 57.9
// non-causal GFLOP per token at 8K).
TEST(FlopsTest, MatchesTheMegatronFormulaOnPublishedModels) {
  EXPECT_NEAR(FlopsPerToken("llama3-70b", 8192, FlopsFormula::kCausal), 449.2, 449.2 * 0.005);
  EXPECT_NEAR(FlopsPerToken("llama3-8b", 8192, FlopsFormula::kCausal), 51.47, 51.47 * 0.005);
  EXPECT_NEAR(FlopsPerToken("llama3.1-405b", 8192, FlopsFormula::kCausal), 2524, 2524 * 0.005);
  EXPECT_NEAR(FlopsPerToken("llama3-70b", 8192, FlopsFormula::kNoncausal), 481.4, 481.4 * 0.005);
  EXPECT_NEAR(FlopsPerToken("llama3-8b", 8192, FlopsFormula::kNoncausal), 57.9, 57.9 * 0.005);
}

TEST(StepTimeTest, TermsSumToTheStep) {
  auto step = PredictStepTime(Example());
  ASSERT_TRUE(step.has_value());
  double sum = 0;
  for (const StepTerm& t : step->terms) sum += t.seconds;
  EXPECT_NEAR(sum, step->step_time_s, 1e-9);
  EXPECT_GT(step->step_time_s, 0.5);
  EXPECT_LT(step->step_time_s, 10);
}

// The seed study's side-by-side runs (Bridge skill nemo-mbridge-perf-memory-tuning, 32 H100,
// FP8-CS): PP 8 at DP 1 costs 5.1%, TP 8 27.7%, `mlp` recompute 15.7%.
TEST(StepTimeTest, SeedStudyOrderAndRecomputeCost) {
  const model::Job base = Example();
  model::Job tp8 = base;
  tp8.model.tensor_model_parallel_size = 8;
  tp8.model.expert_tensor_parallel_size = 8;
  model::Job pp8 = base;
  pp8.model.pipeline_model_parallel_size = 8;
  pp8.model.microbatch_group_size_per_vp_stage = 8;
  model::Job mlp = base;
  mlp.model.recompute_granularity = model::RecomputeGranularity::kSelective;
  mlp.model.recompute_modules = {"mlp"};
  const double b = Tps(base);
  EXPECT_LT(Tps(tp8), Tps(pp8));
  EXPECT_LT(Tps(pp8), b);
  EXPECT_NEAR(Tps(pp8) / b, 1 - 0.051, 0.03);
  EXPECT_NEAR(Tps(mlp) / b, 1 - 0.157, 0.03);
}

TEST(StepTimeTest, OptimizerOffloadCostsMoreWithTheFractionAndLessWithOverlap) {
  model::Job job = Example();
  const double none = Tps(job);
  job.optimizer.optimizer_cpu_offload = true;
  job.optimizer.optimizer_offload_fraction = 0.5;
  const double half = Tps(job);
  job.optimizer.optimizer_offload_fraction = 1.0;
  const double all = Tps(job);
  job.optimizer.overlap_cpu_optimizer_d2h_h2d = true;
  const double overlapped = Tps(job);
  EXPECT_LT(half, none);
  EXPECT_LT(all, half);
  EXPECT_GT(overlapped, all);
}

TEST(StepTimeTest, CudaGraphsRemoveDispatchTime) {
  model::Job job = Example();
  job.model.cuda_graph_impl = model::CudaGraphImpl::kNone;
  job.model.cuda_graph_scope.clear();
  const double eager = Tps(job);
  job.model.cuda_graph_impl = model::CudaGraphImpl::kFullIteration;
  EXPECT_GE(Tps(job), eager);
}

TEST(StepTimeTest, MoreMicrobatchesShrinkTheBubble) {
  model::Job job = Example();
  const double base = Tps(job);
  job.train.global_batch_size *= 4;
  EXPECT_GT(Tps(job), base);
}

TEST(StepTimeTest, LoraSkipsBaseWeightGradientsAndRegatherCosts) {
  model::Job full = Example();
  model::Job lora = full;
  lora.peft.emplace();
  const double lora_tps = Tps(lora);
  EXPECT_GT(lora_tps, Tps(full));  // no weight-gradient GEMMs for the frozen base
  lora.peft->sequence_parallel_input_regather = true;
  EXPECT_LT(Tps(lora), lora_tps);
}

TEST(StepTimeTest, FormulaNames) {
  EXPECT_EQ(*ParseFlopsFormula("causal", "f"), FlopsFormula::kCausal);
  EXPECT_EQ(*ParseFlopsFormula("noncausal", "f"), FlopsFormula::kNoncausal);
  auto bad = ParseFlopsFormula("half", "measured.flops_formula");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().field, "measured.flops_formula");
}

}  // namespace
}  // namespace memtune::steptime
