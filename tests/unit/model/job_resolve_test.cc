// ResolveJob: derived fields follow an edited spec; errors name the field as the parser does.
#include <gtest/gtest.h>

#include <string>

#include "memtune/model/job_parse.h"
#include "memtune/model/job_spec.h"

namespace memtune::model {
namespace {

JobSpec SpecOf(const std::string& text) {
  auto doc = ParseJobText(text);
  EXPECT_TRUE(doc.has_value()) << doc.error().Describe();
  return doc ? doc->spec : JobSpec{};
}

constexpr const char* kMoe =
    "model: {preset: mixtral-8x7b, tensor_model_parallel_size: 2}\n"
    "mixed_precision: bf16_mixed\n";

TEST(JobResolveTest, DerivedLayoutFollowsAnEditedSpec) {
  JobSpec spec = SpecOf(kMoe);
  EXPECT_FALSE(spec.model.expert_tensor_parallel_size);  // unset in the document: derived
  EXPECT_FALSE(spec.memtune.world_size);
  EXPECT_FALSE(spec.train.global_batch_size);
  spec.model.tensor_model_parallel_size = 8;
  spec.model.pipeline_model_parallel_size = 2;
  spec.train.micro_batch_size = 2;
  auto job = ResolveJob(spec);
  ASSERT_TRUE(job) << job.error().Describe();
  EXPECT_EQ(job->model.expert_tensor_parallel_size, 8);
  EXPECT_EQ(job->model.microbatch_group_size_per_vp_stage, 2);
  EXPECT_EQ(job->memtune.world_size, 16);
  EXPECT_EQ(job->train.global_batch_size, 2);  // MBS * DP (1)
  spec.memtune.world_size = 64;
  job = ResolveJob(spec);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->train.global_batch_size, 8);  // MBS 2 * DP 4
}

TEST(JobResolveTest, DeclaredValuesWin) {
  JobSpec spec = SpecOf(kMoe);
  spec.model.expert_tensor_parallel_size = 1;
  spec.model.ffn_hidden_size = 1000;
  spec.train.global_batch_size = 512;
  auto job = ResolveJob(spec);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->model.expert_tensor_parallel_size, 1);
  EXPECT_EQ(job->model.ffn_hidden_size, 1000);
  EXPECT_EQ(job->train.global_batch_size, 512);
}

TEST(JobResolveTest, ArchitectureDefaultsFollowTheSpec) {
  JobSpec spec = SpecOf(
      "model: {num_layers: 2, hidden_size: 1024, num_attention_heads: 8, "
      "vocab_size: 1000}\n");
  spec.model.hidden_size = 2048;
  auto job = ResolveJob(spec);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->model.ffn_hidden_size, 8192);
  EXPECT_EQ(job->model.kv_channels, 256);
  EXPECT_EQ(job->model.num_query_groups, 8);
  EXPECT_EQ(job->model.max_position_embeddings, 1024);  // seq_length
  EXPECT_EQ(job->model.pipeline_dtype, Dtype::kFp32);   // params_dtype, no preset
}

TEST(JobResolveTest, MixedPrecisionIsAppliedAtResolve) {
  JobSpec spec = SpecOf(kMoe);
  auto fp16 = MixedPrecisionPreset("fp16-mixed");
  ASSERT_TRUE(fp16);
  EXPECT_EQ(fp16->name, "fp16_mixed");
  spec.mixed_precision = *fp16;
  auto job = ResolveJob(spec);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->mixed_precision, "fp16_mixed");
  EXPECT_TRUE(job->model.fp16);
  EXPECT_EQ(job->model.params_dtype, Dtype::kFp16);
  EXPECT_FALSE(job->ddp.grad_reduce_in_fp32);
  spec.mixed_precision.reset();
  job = ResolveJob(spec);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->mixed_precision, "");
}

TEST(JobResolveTest, UnknownPresetNamesTheAllowed) {
  auto mp = MixedPrecisionPreset("bf16_mixd");
  ASSERT_FALSE(mp);
  EXPECT_EQ(mp.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(mp.error().field, "mixed_precision");
  EXPECT_EQ(mp.error().message,
            "mixed_precision = 'bf16_mixd' is not a Bridge mixed-precision preset");
  EXPECT_NE(mp.error().hint.find("did you mean 'bf16_mixed'?"), std::string::npos);
}

TEST(JobResolveTest, QLoraRankIsTriState) {
  JobSpec spec = SpecOf(kMoe);
  spec.model.multi_latent_attention = true;
  auto job = ResolveJob(spec);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->model.q_lora_rank, 512);  // unset: MLA's default
  spec.model.q_lora_rank = std::optional<std::int64_t>();
  job = ResolveJob(spec);
  ASSERT_TRUE(job);
  EXPECT_FALSE(job->model.q_lora_rank);  // explicit none
}

TEST(JobResolveTest, ErrorsMatchTheParser) {
  JobSpec spec = SpecOf(kMoe);
  spec.model.pipeline_model_parallel_size = 0;
  auto job = ResolveJob(spec);
  ASSERT_FALSE(job);
  EXPECT_EQ(job.error().code, ErrorCode::kInvalidConfig);
  EXPECT_EQ(job.error().field, "model.pipeline_model_parallel_size");
  EXPECT_EQ(job.error().message, "model.pipeline_model_parallel_size = 0 is out of range");
  EXPECT_EQ(job.error().hint, "allowed: 1 to 100,000");
  auto doc = ParseJobText("model: {preset: mixtral-8x7b, pipeline_model_parallel_size: 0}\n");
  ASSERT_FALSE(doc);
  EXPECT_EQ(doc.error().message, job.error().message);

  spec = SpecOf(kMoe);
  spec.model.hidden_size = 0;
  job = ResolveJob(spec);
  ASSERT_FALSE(job);
  EXPECT_EQ(job.error().message, "model.hidden_size is required");
}

}  // namespace
}  // namespace memtune::model
