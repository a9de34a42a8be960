// Library GEMM workspaces (docs/estimator.md "Library workspaces").
#include "tensors/workspaces.h"

#include <gtest/gtest.h>

#include <vector>

#include "unit/estimate/test_jobs.h"

namespace memtune::tensors {
namespace {

using estimate::ModelChunk;
using estimate::testing::Llama70BJob;
using estimate::testing::TinyJob;

constexpr std::int64_t kMiB = 1024 * 1024;

TEST(WorkspacesTest, TeWorkspaceIs32MiBFromHopperOn) {
  EXPECT_EQ(TeGemmWorkspaceBytes("9.0"), 32 * kMiB + 1024);
  EXPECT_EQ(TeGemmWorkspaceBytes("10.0"), 32 * kMiB + 1024);
  EXPECT_EQ(TeGemmWorkspaceBytes("8.0"), 4 * kMiB);
  EXPECT_EQ(TeGemmWorkspaceBytes(""), 32 * kMiB + 1024);  // no GPU given: Hopper assumed
}

// TE is_non_tn_fp8_gemm_supported: (10, 0) <= cc < (12, 0) or cc >= (13, 0).
TEST(WorkspacesTest, Fp8TransposeKeptOutsideTeNonTnCapabilities) {
  EXPECT_TRUE(Fp8GemmNeedsTranspose("9.0"));
  EXPECT_TRUE(Fp8GemmNeedsTranspose("8.9"));
  EXPECT_FALSE(Fp8GemmNeedsTranspose("10.0"));
  EXPECT_FALSE(Fp8GemmNeedsTranspose("11.0"));
  EXPECT_TRUE(Fp8GemmNeedsTranspose("12.0"));
  EXPECT_FALSE(Fp8GemmNeedsTranspose("13.0"));
  EXPECT_TRUE(Fp8GemmNeedsTranspose("gfx942"));
  EXPECT_TRUE(Fp8GemmNeedsTranspose(""));  // no GPU given: Hopper assumed
}

TEST(WorkspacesTest, TorchWorkspaceFollowsCublasWorkspaceConfig) {
  const std::map<std::string, std::string> none;
  EXPECT_EQ(TorchCublasWorkspaceBytes("9.0", none), 32 * kMiB);
  EXPECT_EQ(TorchCublasWorkspaceBytes("12.0", none), 32 * kMiB);
  EXPECT_EQ(TorchCublasWorkspaceBytes("8.0", none), 4096 * 1024 * 2 + 16 * 1024 * 8);
  EXPECT_EQ(TorchCublasWorkspaceBytes("gfx942", none), 128 * kMiB);
  EXPECT_EQ(TorchCublasWorkspaceBytes("gfx90a", none), 32 * kMiB);
  EXPECT_EQ(TorchCublasWorkspaceBytes("8.0", {{"CUBLAS_WORKSPACE_CONFIG", ":4096:8"}}), 32 * kMiB);
  EXPECT_EQ(TorchCublasWorkspaceBytes("9.0", {{"CUBLAS_WORKSPACE_CONFIG", ":16:8"}}), 128 * 1024);
  EXPECT_EQ(TorchCublasWorkspaceBytes("9.0", {{"CUBLAS_WORKSPACE_CONFIG", ":4096:2:16:8"}}),
            4096 * 1024 * 2 + 16 * 1024 * 8);
  // Unparsable: PyTorch warns and keeps its default.
  EXPECT_EQ(TorchCublasWorkspaceBytes("9.0", {{"CUBLAS_WORKSPACE_CONFIG", "garbage"}}), 32 * kMiB);
  EXPECT_EQ(TorchCublasWorkspaceBytes("9.0", {{"CUBLAS_WORKSPACE_CONFIG", ":x:8"}}), 32 * kMiB);
  // Absurd sizes neither overflow nor count (PyTorch could not allocate them).
  EXPECT_EQ(
      TorchCublasWorkspaceBytes("9.0", {{"CUBLAS_WORKSPACE_CONFIG", ":999999999999999:999999"}}),
      32 * kMiB);
  EXPECT_EQ(
      TorchCublasWorkspaceBytes("9.0", {{"CUBLAS_WORKSPACE_CONFIG", ":99999999999999999999:8"}}),
      32 * kMiB);
}

// Rules with one TE workspace of 100 B, one torch workspace of 10 B and, for local
// attention, a score buffer of 1000 B.
RankWorkspaces Compute(const model::Job& job, const std::vector<ModelChunk>& chunks,
                       const std::vector<bool>& moe_pattern) {
  WorkspaceRules rules = MakeWorkspaceRules(job, MakeActContext(job), MakeParamCatalog(job));
  rules.te_bytes = 100;
  rules.torch_bytes = 10;
  if (rules.attn_scores_bytes > 0) rules.attn_scores_bytes = 1000;
  return ComputeRankWorkspaces(rules, chunks, moe_pattern);
}

TEST(WorkspacesTest, WhichRanksHoldWhich) {
  auto job = TinyJob();
  const std::vector<bool> dense;
  const ModelChunk first{0, 0, 1, true, false, 0}, last{0, 1, 1, false, true, 0};
  const ModelChunk empty{0, 2, 0, false, false, 0};
  // A dense TE stage without the output layer runs no torch GEMM.
  auto w = Compute(job, {first}, dense);
  EXPECT_EQ(w.te, 100);
  EXPECT_EQ(w.torch, 0);
  EXPECT_EQ(w.attn_scores, 0);  // fused attention keeps no score buffer
  // The output layer's GEMMs run in the Python thread (forward) and the autograd thread.
  EXPECT_EQ(Compute(job, {last}, dense).torch, 20);
  EXPECT_EQ(Compute(job, {empty}, dense).te, 0);
  job.model.tp_comm_overlap = true;  // three userbuffers workspaces more
  EXPECT_EQ(Compute(job, {first}, dense).te, 400);
  job.model.tp_comm_overlap = false;
  job.model.num_moe_experts = 4;
  job.model.moe_grouped_gemm = true;  // four grouped-GEMM streams, and the router's GEMMs
  EXPECT_EQ(Compute(job, {first}, {false, true}).te, 100);  // layer 0 is dense
  w = Compute(job, {last}, {false, true});
  EXPECT_EQ(w.te, 500);
  EXPECT_EQ(w.torch, 20);
  job = TinyJob();
  job.model.attention_backend = model::AttentionBackend::kUnfused;  // bmm in forward and backward
  EXPECT_EQ(Compute(job, {first}, dense).torch, 20);
  job.model.transformer_impl = model::TransformerImpl::kLocal;  // no TE modules at all
  w = Compute(job, {first}, dense);
  EXPECT_EQ(w.te, 0);
  EXPECT_EQ(w.torch, 20);
  EXPECT_EQ(w.attn_scores, 1000);  // the local core attention's score buffer
  EXPECT_EQ(Compute(job, {empty}, dense).attn_scores, 0);  // no layers, no attention
}

// The output layer's sequence-parallel all-gather lands in MCore's global memory buffer,
// which stays; local attention's score buffer is the same tensor (named "mpu").
TEST(WorkspacesTest, OutputGatherBufferIsKeptOnTheLastStageWithSp) {
  auto job = TinyJob();  // 4 tokens, h = 8, bf16
  const ModelChunk first{0, 0, 1, true, false, 0}, last{0, 1, 1, false, true, 0};
  EXPECT_EQ(Compute(job, {last}, {}).output_gather, 0);  // no SP: no gather
  job.model.tensor_model_parallel_size = 2;
  job.model.sequence_parallel = true;
  EXPECT_EQ(Compute(job, {last}, {}).output_gather, 2 * 8 * 4);
  EXPECT_EQ(Compute(job, {first}, {}).output_gather, 0);
  job.model.transformer_impl =
      model::TransformerImpl::kLocal;  // a 1000 B score buffer in the same global buffer
  const auto w = Compute(job, {last}, {});
  EXPECT_EQ(w.attn_scores, 1000);
  EXPECT_EQ(w.output_gather, 0);
}

// The allgather MoE dispatcher gathers the tokens over expert TP x EP into the same global
// buffer: a MoE rank keeps [gathered tokens, h]; the last stage the larger of that and the
// output layer's gather; alltoall and a single rank (nothing gathered) keep none.
TEST(WorkspacesTest, AllgatherDispatcherGrowsTheGlobalBuffer) {
  auto job = TinyJob();  // 4 tokens, h = 8, bf16
  job.model.num_moe_experts = 4;
  job.model.moe_router_topk = 2;
  job.model.moe_ffn_hidden_size = 8;
  const ModelChunk first{0, 0, 1, true, false, 0}, last{0, 1, 1, false, true, 0};
  const std::vector<bool> moe = {true, true};
  EXPECT_EQ(Compute(job, {first}, moe).output_gather, 0);  // EP 1, ETP 1: no gather
  job.model.expert_model_parallel_size = 2;
  EXPECT_EQ(Compute(job, {first}, moe).output_gather, 2 * 8 * 4 * 2);
  EXPECT_EQ(Compute(job, {first}, {false, false}).output_gather, 0);  // dense layers
  job.model.tensor_model_parallel_size = 2;  // SP: 2 local tokens, ETP 2 x EP 2 gathered
  job.model.sequence_parallel = true;
  EXPECT_EQ(Compute(job, {first}, moe).output_gather, 2 * 8 * 2 * 4);
  EXPECT_EQ(Compute(job, {last}, moe).output_gather, 2 * 8 * 2 * 4);  // max(output 64, 128)
  job.model.moe_token_dispatcher_type = model::MoeTokenDispatcher::kAlltoall;
  EXPECT_EQ(Compute(job, {first}, moe).output_gather, 0);
}

// TE's cached weight-gradient placeholders: one per distinct local weight shape.
TEST(WorkspacesTest, DummyWgradsAreOnePerLocalWeightShape) {
  auto job = Llama70BJob();
  job.model.tensor_model_parallel_size = 4;
  job.model.pipeline_model_parallel_size = 4;
  const std::vector<bool> dense;
  const ModelChunk middle{0, 20, 20, false, false, 0}, last{4, 76, 4, false, true, 0};
  // linear_qkv [(64 + 2*8)*128/4, 8192], linear_proj [8192, 64*128/4], linear_fc1
  // [2*28672/4, 8192], linear_fc2 [8192, 28672/4], bf16; however many layers.
  const std::int64_t layer = 2 * (2560LL * 8192 + 8192LL * 2048 + 14336LL * 8192 + 8192LL * 7168);
  auto w = Compute(job, {middle}, dense);
  EXPECT_EQ(w.wgrad_sources, kWgradDense);
  EXPECT_EQ(DummyWgradShapes(MakeWorkspaceRules(job, MakeActContext(job), MakeParamCatalog(job)),
                             w.wgrad_sources)
                .count,
            4);
  EXPECT_EQ(w.dummy_wgrad, layer);
  // The output layer's [128512 / 4, 8192] (the vocabulary padded to 128 x TP; MCore's
  // ColumnParallelLinear, in the input dtype).
  EXPECT_EQ(Compute(job, {last}, dense).dummy_wgrad, layer + 2 * 32128LL * 8192);
  // No placeholder without gradient_accumulation_fusion or for PEFT's frozen weights.
  job.model.gradient_accumulation_fusion = false;
  EXPECT_EQ(Compute(job, {last}, dense).dummy_wgrad, 0);
  job.model.gradient_accumulation_fusion = true;
  job.peft = model::PeftConfig{};
  EXPECT_EQ(Compute(job, {last}, dense).dummy_wgrad, 0);
}

TEST(WorkspacesTest, DummyWgradsKeyOnShapeNotElementCount) {
  auto job = TinyJob();  // a non-gated MLP: fc1 [4h, h] and fc2 [h, 4h] have equal sizes
  job.model.gated_linear_unit = false;
  job.model.ffn_hidden_size = 4 * job.model.hidden_size;
  const std::int64_t h = job.model.hidden_size;
  const ModelChunk first{0, 0, 1, true, false, 0};
  const auto w = Compute(job, {first}, {});
  const WgradShapes shapes = DummyWgradShapes(
      MakeWorkspaceRules(job, MakeActContext(job), MakeParamCatalog(job)), w.wgrad_sources);
  int mlp_shapes = 0;
  for (int i = 0; i < shapes.count; ++i) {
    const WgradShape& s = shapes.shapes[i];
    if (s.rows * s.cols == 4 * h * h) ++mlp_shapes;
  }
  EXPECT_EQ(mlp_shapes, 2);
  // A MoE layer: linear_qkv [24, 8] and linear_proj [8, 8]; the experts' fc1 and fc2 are
  // [8, 8] too (moe_ffn = h, not gated), so one placeholder serves all four; the router
  // returns a real gradient and has none.
  job.model.num_moe_experts = 8;
  job.model.moe_ffn_hidden_size = h;
  EXPECT_EQ(Compute(job, {first}, {true}).dummy_wgrad, 2 * (24 * 8 + 8 * 8));
  EXPECT_EQ(Compute(job, {first}, {false}).dummy_wgrad, 2 * (24 * 8 + 8 * 8 + 32 * 8 + 8 * 32));
}

TEST(WorkspacesTest, UnionBytesCountAShapeSharedBySourcesOnce) {
  WorkspaceRules rules;
  WgradShapes& a = rules.wgrad_dense;
  WgradShapes& b = rules.wgrad_moe;
  WgradShapes& d = rules.wgrad_mtp;  // (rules.wgrad_output stays empty)
  a.Add({2, 3, 2});                  // 12 B
  a.Add({4, 4, 2});                  // 32 B
  b.Add({4, 4, 2});
  b.Add({1, 8, 1});  // 8 B
  d.Add({2, 3, 2});
  const auto bytes = WgradBytesByMask(rules);  // bits: dense 1, MoE 2, output 4, MTP 8
  EXPECT_EQ(bytes[0b0001], 44);
  EXPECT_EQ(bytes[0b0011], 12 + 32 + 8);
  EXPECT_EQ(bytes[0b1001], 44);
  EXPECT_EQ(bytes[0b1010], 32 + 8 + 12);
  EXPECT_EQ(bytes[0b1011], 52);
  // The empty source adds nothing: a rank whose release keeps no cached output placeholder
  // (model/versions.h McoreCachesOutputWgrad) still holds its layers' ones.
  EXPECT_EQ(bytes[0b0100], 0);
  EXPECT_EQ(bytes[0b0111], 52);
}

TEST(WorkspacesTest, WgradShapesCountEachShapeOnceAndKeepOverflowBytes) {
  WgradShapes shapes;
  shapes.Add({2, 3, 2});
  shapes.Add({2, 3, 2});
  shapes.Add({3, 2, 2});
  shapes.Add({2, 3, 4});  // another dtype
  EXPECT_EQ(shapes.count, 3);
  EXPECT_EQ(shapes.Bytes(), 12 + 12 + 24);
  WgradShapes many;
  std::int64_t total = 0;
  for (int i = 1; i <= kMaxWgradShapes + 5; ++i) {
    many.Add({i, 1, 1});
    total += i;
  }
  EXPECT_EQ(many.count, kMaxWgradShapes);
  EXPECT_EQ(many.Bytes(), total);
}

}  // namespace
}  // namespace memtune::tensors
