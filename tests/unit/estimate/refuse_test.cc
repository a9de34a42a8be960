// EstimateMemory refuses jobs whose layout does not divide, in every mode, naming the rule.
#include <gtest/gtest.h>

#include "memtune/estimate/estimate.h"
#include "memtune/model/checks.h"
#include "unit/estimate/test_jobs.h"

namespace memtune::estimate {
namespace {

using testing::Llama70BJob;

TEST(RefuseTest, WorldSizeNotDivisibleByModelParallelIsRefusedInEveryMode) {
  model::Job job = Llama70BJob();
  job.model.tensor_model_parallel_size = 3;  // 32 GPUs, TP3 PP4: no integer DP; 64 heads % 3 != 0
  for (Mode mode : {Mode::kAccurate, Mode::kMegatronLm, Mode::kBridge}) {
    EstimateOptions options;
    options.mode = mode;
    auto e = EstimateMemory(job, options);
    ASSERT_FALSE(e) << ModeName(mode) << " gave a number for an inconsistent layout";
    EXPECT_EQ(e.error().code, ErrorCode::kInvalidConfig);
    EXPECT_EQ(e.error().field, "memtune.world_size");
    EXPECT_NE(e.error().message.find("[layout.world-size]"), std::string::npos)
        << e.error().message;
    EXPECT_NE(e.error().message.find("more; `memtune check` lists them all"), std::string::npos);
    EXPECT_FALSE(e.error().hint.empty());
  }
}

TEST(RefuseTest, GlobalBatchNotDivisibleIsRefused) {
  model::Job job = Llama70BJob();
  job.train.global_batch_size = 33;  // DP 2, MBS 1
  auto e = EstimateMemory(job);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("[layout.global-batch]"), std::string::npos)
      << e.error().message;
}

TEST(RefuseTest, SizesBeyondInt64ArithmeticAreRefusedNotWrapped) {
  // 1e5 sequences of 1e8 tokens: the activation bytes would pass 2^63 and wrap around.
  model::Job job = Llama70BJob();
  job.train.micro_batch_size = 100000;
  job.train.global_batch_size = 800000;  // 4 micro-batches per DP rank (VPP needs PP of them)
  job.model.seq_length = 100000000;
  for (Mode mode : {Mode::kAccurate, Mode::kMegatronLm, Mode::kBridge}) {
    EstimateOptions options;
    options.mode = mode;
    auto e = EstimateMemory(job, options);
    ASSERT_FALSE(e) << ModeName(mode);
    EXPECT_EQ(e.error().code, ErrorCode::kInvalidConfig);
    EXPECT_EQ(e.error().field, "train.micro_batch_size");
  }
  // The largest sizes a real job uses stay well inside: a million-token sequence.
  job.train.micro_batch_size = 1;
  job.train.global_batch_size = 32;
  job.model.seq_length = 1 << 20;
  EXPECT_TRUE(EstimateMemory(job)) << "a 1M-token sequence must still be estimated";
}

TEST(RefuseTest, UnfusedAttentionBeyondAnyDeviceIsRefusedNotWrapped) {
  model::Job job = Llama70BJob();
  job.model.attention_backend = model::AttentionBackend::kUnfused;
  job.model.seq_length = 100'000'000;  // 8 x 64 heads x (1e8)^2 bytes: beyond 1 PiB
  auto e = EstimateMemory(job);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().field, "model.seq_length");
  job.model.seq_length = 32768;  // 34 GB per layer and micro-batch: estimated
  EXPECT_TRUE(EstimateMemory(job)) << "a large but real softmax is estimated";
}

TEST(RefuseTest, ContradictoryPrecisionIsRefusedWithTheRulesMessage) {
  model::Job job = Llama70BJob();
  job.model.fp16 = true;
  job.model.bf16 = true;
  auto e = EstimateMemory(job);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("[precision.fp16-bf16]"), std::string::npos)
      << e.error().message;
}

TEST(RefuseTest, NonStructuralErrorsDoNotBlockTheEstimate) {
  // CUDA graphs + expandable segments without NCCL_GRAPH_REGISTER=0 is an upstream error
  // that does not change the arithmetic: the estimate still runs; `check` reports it.
  model::Job job = Llama70BJob();
  job.model.cuda_graph_impl = model::CudaGraphImpl::kTransformerEngine;
  job.model.cuda_graph_scope = {"mlp"};
  job.memtune.env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True";
  bool upstream_error = false;
  for (const auto& f : model::CheckJob(job)) {
    upstream_error |= f.rule_id == "alloc.cuda-graph-nccl-register";
  }
  ASSERT_TRUE(upstream_error);
  EXPECT_TRUE(model::StructuralErrors(job).empty());
  EXPECT_TRUE(EstimateMemory(job));
}

TEST(RefuseTest, BlocksEstimateClassifiesRules) {
  EXPECT_TRUE(model::BlocksEstimate("layout.world-size"));
  EXPECT_TRUE(model::BlocksEstimate("heads.tp-divides-heads"));
  EXPECT_TRUE(model::BlocksEstimate("pipeline.even-layers-vpp"));
  EXPECT_TRUE(model::BlocksEstimate("moe.experts-divisible-ep"));
  // Every error blocks unless marked memory-neutral (issue 22: no number for a job upstream
  // refuses); warnings never block.
  EXPECT_TRUE(model::BlocksEstimate("layout.tp-comm-overlap-needs-sp"));
  EXPECT_TRUE(model::BlocksEstimate("offload.pp"));
  EXPECT_TRUE(model::BlocksEstimate("precision.fp16-bf16"));
  EXPECT_FALSE(model::BlocksEstimate("alloc.cuda-graph-nccl-register"));
  EXPECT_FALSE(model::BlocksEstimate("precision.ce-fusion-te"));
  for (const auto& rule : model::ListRules()) {
    SCOPED_TRACE(rule.id);
    EXPECT_EQ(model::BlocksEstimate(rule.id),
              rule.severity == model::Severity::kError && !rule.memory_neutral);
  }
}

}  // namespace
}  // namespace memtune::estimate
