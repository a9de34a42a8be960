// comm_overlap (Bridge CommOverlapConfig.setup) and memtune.torchtitan in the job parser.
#include <gtest/gtest.h>

#include <string>

#include "memtune/model/job_parse.h"

namespace memtune::model {
namespace {

constexpr const char* kJob =
    "model: {num_layers: 32, hidden_size: 4096, num_attention_heads: 32, vocab_size: 128256,\n"
    "        tensor_model_parallel_size: 2, pipeline_model_parallel_size: 2,\n"
    "        sequence_parallel: true}\n"
    "optimizer: {use_distributed_optimizer: true}\n"
    "memtune: {world_size: 16}\n";

Result<JobDocument> Parse(const std::string& extra) { return ParseJobText(kJob + extra); }

bool Warns(const JobDocument& doc, const std::string& part) {
  for (const std::string& w : doc.warnings) {
    if (w.find(part) != std::string::npos) return true;
  }
  return false;
}

TEST(CommOverlapTest, SetsTpOverlapAndDerivesDataParallelOverlap) {
  auto doc = Parse("comm_overlap: {tp_comm_overlap: true}\n");
  ASSERT_TRUE(doc.has_value()) << doc.error().Describe();
  EXPECT_TRUE(doc->job.model.tp_comm_overlap);
  // DP = 16 / (2 x 2) = 4 > 1 with the distributed optimizer: Bridge turns both on.
  EXPECT_TRUE(doc->job.ddp.overlap_grad_reduce);
  EXPECT_TRUE(doc->job.ddp.overlap_param_gather);
  EXPECT_FALSE(doc->job.optimizer.overlap_param_gather_with_optimizer_step);
  // PP 2 without VPP: batched send/recv.
  ASSERT_TRUE(doc->job.model.batch_p2p_comm.has_value());
  EXPECT_TRUE(*doc->job.model.batch_p2p_comm);
}

TEST(CommOverlapTest, ExplicitValuesWin) {
  auto doc = Parse(
      "comm_overlap: {tp_comm_overlap: true, overlap_grad_reduce: false,\n"
      "               overlap_param_gather_with_optimizer_step: true, batch_p2p_comm: false,\n"
      "               defer_embedding_wgrad_compute: true, wgrad_deferral_limit: 22}\n");
  ASSERT_TRUE(doc.has_value()) << doc.error().Describe();
  EXPECT_FALSE(doc->job.ddp.overlap_grad_reduce);
  EXPECT_TRUE(doc->job.optimizer.overlap_param_gather_with_optimizer_step);
  EXPECT_FALSE(*doc->job.model.batch_p2p_comm);
  EXPECT_TRUE(doc->job.model.defer_embedding_wgrad_compute);
  EXPECT_EQ(doc->job.model.wgrad_deferral_limit, 22);
}

TEST(CommOverlapTest, TpOverlapNeedsSequenceParallelism) {
  auto no_sp = ParseJobText(
      "model: {num_layers: 32, hidden_size: 4096, num_attention_heads: 32, vocab_size: 128256,\n"
      "        tensor_model_parallel_size: 2}\n"
      "comm_overlap: {tp_comm_overlap: true}\n");
  ASSERT_TRUE(no_sp.has_value()) << no_sp.error().Describe();
  EXPECT_FALSE(no_sp->job.model.tp_comm_overlap);
  EXPECT_TRUE(Warns(*no_sp, "without sequence_parallel"));
}

TEST(CommOverlapTest, NoDataParallelOverlapWithoutTheDistributedOptimizer) {
  auto doc = ParseJobText(
      "model: {num_layers: 32, hidden_size: 4096, num_attention_heads: 32, vocab_size: 128256}\n"
      "memtune: {world_size: 8}\ncomm_overlap: {tp_comm_overlap: false}\n");
  ASSERT_TRUE(doc.has_value()) << doc.error().Describe();
  EXPECT_FALSE(doc->job.ddp.overlap_grad_reduce);
}

TEST(CommOverlapTest, WrongShapesNameTheField) {
  auto scalar = Parse("comm_overlap: 3\n");
  ASSERT_FALSE(scalar.has_value());
  EXPECT_EQ(scalar.error().field, "comm_overlap");
  auto bad = Parse("comm_overlap: {tp_comm_overlap: maybe}\n");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().field, "comm_overlap.tp_comm_overlap");
}

TEST(TorchtitanFieldTest, FlattensSectionsAndRefusesNonMappings) {
  auto full = ParseJobText(
      "model: {num_layers: 32, hidden_size: 4096, num_attention_heads: 32, vocab_size: 128256}\n"
      "memtune: {torchtitan: {parallelism: {enable_async_tensor_parallel: true},\n"
      "                       model: {converters: [float8, mx]}}}\n");
  ASSERT_TRUE(full.has_value()) << full.error().Describe();
  EXPECT_EQ(full->job.memtune.torchtitan.at("parallelism.enable_async_tensor_parallel"), "true");
  EXPECT_EQ(full->job.memtune.torchtitan.at("model.converters"), "float8,mx");
  auto scalar = ParseJobText(
      "model: {num_layers: 32, hidden_size: 4096, num_attention_heads: 32, vocab_size: 128256}\n"
      "memtune: {torchtitan: 3}\n");
  ASSERT_FALSE(scalar.has_value());
  EXPECT_EQ(scalar.error().field, "memtune.torchtitan");
}

}  // namespace
}  // namespace memtune::model
