// Library GEMM workspaces (docs/estimator.md "Library workspaces").
#include "estimate/workspaces.h"

#include <gtest/gtest.h>

#include <vector>

#include "unit/estimate/test_jobs.h"

namespace memtune::estimate::internal {
namespace {

using testing::TinyJob;

constexpr std::int64_t kMiB = 1024 * 1024;

TEST(WorkspacesTest, TeWorkspaceIs32MiBFromHopperOn) {
  EXPECT_EQ(TeGemmWorkspaceBytes("9.0"), 32 * kMiB + 1024);
  EXPECT_EQ(TeGemmWorkspaceBytes("10.0"), 32 * kMiB + 1024);
  EXPECT_EQ(TeGemmWorkspaceBytes("8.0"), 4 * kMiB);
  EXPECT_EQ(TeGemmWorkspaceBytes(""), 32 * kMiB + 1024);  // no GPU given: Hopper assumed
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
  EXPECT_EQ(TorchCublasWorkspaceBytes("9.0", {{"CUBLAS_WORKSPACE_CONFIG", ":999999999999999:999999"}}),
            32 * kMiB);
  EXPECT_EQ(TorchCublasWorkspaceBytes("9.0", {{"CUBLAS_WORKSPACE_CONFIG", ":99999999999999999999:8"}}),
            32 * kMiB);
}

// Rules with one TE workspace of 100 B, one torch workspace of 10 B and, for local
// attention, a score buffer of 1000 B.
RankWorkspaces Compute(const model::Job& job, const std::vector<ModelChunk>& chunks,
                       const std::vector<bool>& moe_pattern) {
  WorkspaceRules rules = MakeWorkspaceRules(job, MakeActContext(job));
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
  job.model.attention_backend = "unfused";  // bmm in forward and backward
  EXPECT_EQ(Compute(job, {first}, dense).torch, 20);
  job.model.transformer_impl = "local";  // no TE modules at all
  w = Compute(job, {first}, dense);
  EXPECT_EQ(w.te, 0);
  EXPECT_EQ(w.torch, 20);
  EXPECT_EQ(w.attn_scores, 1000);  // the local core attention's score buffer
  EXPECT_EQ(Compute(job, {empty}, dense).attn_scores, 0);  // no layers, no attention
}

}  // namespace
}  // namespace memtune::estimate::internal
