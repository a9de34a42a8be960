// Module timing of one transformer layer (steptime/layer_parts.h).
#include "steptime/layer_parts.h"

#include <gtest/gtest.h>

#include <string>

#include "memtune/model/job_parse.h"

namespace memtune::steptime {
namespace {

model::Job Llama3_8b(int cp) {
  auto doc = model::ParseJobText(
      "model: {preset: llama3-8b, seq_length: " + std::to_string(4096 * cp) +
      ", context_parallel_size: " + std::to_string(cp) +
      "}\ntrain: {global_batch_size: 64}\nmemtune: {gpu: h100, world_size: 8}\n");
  EXPECT_TRUE(doc.has_value()) << (doc ? "" : doc.error().Describe());
  return doc ? doc->job : model::Job{};
}

ModuleTime CoreAttention(const model::Job& job) {
  auto hw = JobHardware(job);
  EXPECT_TRUE(hw.has_value());
  const LayerContext ctx = MakeLayerContext(job, *hw);
  for (const ModuleTime& m : LayerModules(ctx, false, GemmDtype::kBf16)) {
    if (m.recompute_name == "core_attn") return m;
  }
  ADD_FAILURE() << "no core_attn module";
  return {};
}

// Without context parallelism the fused kernel is the whole core attention.
TEST(LayerPartsTest, FusedAttentionWithoutCpHasNoElementwiseWork) {
  const ModuleTime core = CoreAttention(Llama3_8b(1));
  EXPECT_EQ(core.forward.elementwise, 0);
  EXPECT_EQ(core.backward.elementwise, 0);
}

// TE's ring attention at CP 2 on 4,096 local tokens of Llama3-8B (32 heads, 8 KV groups,
// head dim 128): q = o = 16,777,216 elements, K+V = 8,388,608. Forward: the KV send buffer
// (2 x KV), one lower/upper step on average half each (0.5 x (KV + q)), the output merge
// (2 + 4.5 x 0.5 = 4.25 passes over o), all BF16, plus one FP32 lse merge (3 x 4 B x 4,096 x
// 32) = 202,899,456 B.
TEST(LayerPartsTest, RingAttentionAddsTheMergePasses) {
  const model::Job job = Llama3_8b(2);
  auto hw = JobHardware(job);
  ASSERT_TRUE(hw.has_value());
  const ModuleTime core = CoreAttention(job);
  EXPECT_NEAR(core.forward.elementwise, MemorySeconds(202899456.0, *hw), 1e-12);
  // Backward: 2 x KV + 0.5 x (KV + q + 2 o) + 4.25 x q + 4.25 x KV elements, BF16.
  const double bwd =
      2 * 8388608.0 + 0.5 * (8388608.0 + 3 * 16777216.0) + 4.25 * (16777216.0 + 8388608.0);
  EXPECT_NEAR(core.backward.elementwise, MemorySeconds(bwd * 2, *hw), 1e-12);
}

// More ring steps on the same local tokens: more merges per token.
TEST(LayerPartsTest, RingMergeGrowsWithCp) {
  const ModuleTime cp2 = CoreAttention(Llama3_8b(2));
  const ModuleTime cp8 = CoreAttention(Llama3_8b(8));
  EXPECT_GT(cp8.forward.elementwise, 2 * cp2.forward.elementwise);
  EXPECT_GT(cp8.backward.elementwise, 2 * cp2.backward.elementwise);
  EXPECT_GT(cp8.forward.host, cp2.forward.host);
}

}  // namespace
}  // namespace memtune::steptime
