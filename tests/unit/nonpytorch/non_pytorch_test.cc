// The memory outside PyTorch: which communicators a rank has, what NCCL allocates for each,
// and how each setting moves it (docs/non-pytorch.md).
#include "memtune/nonpytorch/non_pytorch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "memtune/core/units.h"
#include "memtune/model/examples.h"
#include "memtune/model/job_parse.h"
#include "nonpytorch/internal.h"

namespace memtune::nonpytorch {
namespace {

// The playbook's seed case: Llama3-70B FP8, 32 x H100, TP4 PP4 VPP5 DP2, dist-opt, TP
// comm overlap.
model::Job SeedJob() {
  auto text = model::ExampleJobYaml("llama3-70b-32xh100");
  EXPECT_TRUE(text.has_value());
  auto doc = model::ParseJobText(text ? *text : "");
  EXPECT_TRUE(doc.has_value()) << doc.error().Describe();
  return doc ? doc->job : model::Job{};
}

const model::GpuSpec* H100() { return *model::FindGpuEntry("h100-sxm-80gb"); }

NonPytorchMemory Estimate(const model::Job& job, int pp_rank = 0) {
  auto m = EstimateNonPytorch(job, H100(), pp_rank);
  EXPECT_TRUE(m.has_value()) << m.error().Describe();
  return m ? *m : NonPytorchMemory{};
}

std::int64_t PartBytes(const NonPytorchMemory& m, const std::string& name) {
  for (const Part& p : m.parts) {
    if (p.name == name) return p.bytes;
  }
  return -1;  // absent
}

std::vector<std::string> CommNames(const model::Job& job, int pp_rank) {
  std::vector<std::string> names;
  for (const Comm& c : RankComms(job, pp_rank, job.memtune.gpus_per_node)) names.push_back(c.name);
  return names;
}

TEST(NonPytorchTest, ASingleGpuJobHoldsOnlyTheContextAndTheDriverReserve) {
  model::Job job = SeedJob();
  job.model.tensor_model_parallel_size = 1;
  job.model.pipeline_model_parallel_size = 1;
  job.model.virtual_pipeline_model_parallel_size.reset();
  job.model.tp_comm_overlap = false;
  job.memtune.world_size = 1;
  const NonPytorchMemory m = Estimate(job);
  EXPECT_EQ(m.Keys(), (std::vector<std::string>{"driver_reserved", "cuda_context"}));
  EXPECT_EQ(m.KeyBytes("nccl"), 0);
  // Context: the catalog's base plus TE's kernel images (192 MiB central).
  EXPECT_EQ(m.KeyBytes("cuda_context"), H100()->cuda_context_bytes + 192 * kMiB);
  EXPECT_EQ(m.KeyBytes("driver_reserved"), H100()->driver_reserved_bytes);
}

TEST(NonPytorchTest, EagerModuleLoadingGrowsTheContext) {
  model::Job job = SeedJob();
  const std::int64_t lazy = Estimate(job).KeyBytes("cuda_context");
  job.memtune.env["CUDA_MODULE_LOADING"] = "EAGER";
  // pytorch/pytorch PR #86509: 667 MB eager vs 287 MB lazy after one op.
  EXPECT_EQ(Estimate(job).KeyBytes("cuda_context") - lazy, 380 * kGB / 1000);
}

TEST(NonPytorchTest, TheSeedRankRunsCollectivesOnTheseCommunicators) {
  const model::Job job = SeedJob();
  EXPECT_EQ(
      CommNames(job, 0),
      (std::vector<std::string>{"world", "te_ub_world", "te_ub_tp", "tp", "dp", "dist_opt_instance",
                                "model_parallel", "pp_pair.next", "pp_pair.prev", "pp"}));
  // Placement: TP4 on one node, DP pairs on one node, PP across four nodes.
  std::map<std::string, std::vector<int>> shape;
  for (const Comm& c : RankComms(job, 0, 8)) shape[c.name] = {c.ranks, c.nodes, c.local_ranks};
  EXPECT_EQ(shape["tp"], (std::vector<int>{4, 1, 4}));
  EXPECT_EQ(shape["dp"], (std::vector<int>{2, 1, 2}));
  EXPECT_EQ(shape["pp"], (std::vector<int>{4, 4, 1}));
  EXPECT_EQ(shape["world"], (std::vector<int>{32, 4, 8}));
  EXPECT_EQ(shape["model_parallel"], (std::vector<int>{16, 4, 4}));
}

TEST(NonPytorchTest, AGroupNothingRunsOnAllocatesNothing) {
  model::Job job = SeedJob();
  job.memtune.world_size = 16;  // DP 1: no data-parallel communicator
  const auto names = CommNames(job, 0);
  EXPECT_EQ(std::count(names.begin(), names.end(), "dp"), 0);
  EXPECT_EQ(PartBytes(Estimate(job), "nccl.dp"), -1);
  // Without interleaving the pipeline sends go over the pipeline group (batched p2p): no
  // pair communicators, and the first stage talks to the next stage only.
  job.model.virtual_pipeline_model_parallel_size.reset();
  const auto plain = CommNames(job, 0);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), "pp_pair.next"), 0);
  int pp_peers = -1;
  for (const Comm& c : RankComms(job, 0, 8)) {
    if (c.name == "pp") pp_peers = c.p2p_peers_local + c.p2p_peers_remote;
  }
  EXPECT_EQ(pp_peers, 1);
}

// An intra-node 2-rank group on H100: 24 channels, 32 p2p channels; init 2 MiB x (2 + 3 x
// 32) = 196 MiB; ring 24 x (10 MiB receive + 2 MiB send) = 288 MiB.
TEST(NonPytorchTest, TheDataParallelPairCostsInitPlusRing) {
  const NonPytorchMemory m = Estimate(SeedJob());
  EXPECT_EQ(PartBytes(m, "nccl.dp"), (196 + 288) * kMiB);
}

TEST(NonPytorchTest, NvlsOffRemovesItsSetupAndBuffers) {
  model::Job job = SeedJob();
  const NonPytorchMemory on = Estimate(job);
  job.memtune.env["NCCL_NVLS_ENABLE"] = "0";
  const NonPytorchMemory off = Estimate(job);
  // TP4 (4 local ranks): NVLS setup 17 x 2 MiB and the 2.22+ buffer 2 x 16 x 1 MiB x 4.
  EXPECT_EQ(PartBytes(on, "nccl.tp") - PartBytes(off, "nccl.tp"), (34 + 128) * kMiB);
  // The bootstrap group only all-gathers small data: NVLS setup only.
  EXPECT_EQ(PartBytes(on, "nccl.te_ub_tp") - PartBytes(off, "nccl.te_ub_tp"), 34 * kMiB);
  // The DP pair has 2 local ranks: NVLS never applies.
  EXPECT_EQ(PartBytes(on, "nccl.dp"), PartBytes(off, "nccl.dp"));
  EXPECT_LT(off.KeyBytes("nccl"), on.KeyBytes("nccl"));
}

TEST(NonPytorchTest, OlderNcclHasLargerNvlsBuffers) {
  model::Job job = SeedJob();
  job.memtune.versions.nccl = "2.21.5";
  const std::int64_t v221 = PartBytes(Estimate(job), "nccl.tp");
  job.memtune.versions.nccl = "2.20.3";
  const std::int64_t v220 = PartBytes(Estimate(job), "nccl.tp");
  job.memtune.versions.nccl = "2.27.7";
  const std::int64_t v227 = PartBytes(Estimate(job), "nccl.tp");
  // Per head: 32 MiB (2.22+), 96 MiB (2.21), 2 x 16 x (4 + 2) MiB = 192 MiB (2.20); 4 heads.
  // 2.20 and 2.21 also connect eagerly (no runtime connection before 2.22).
  EXPECT_GT(v221, v227 + 4 * 64 * kMiB - 1);
  EXPECT_GT(v220, v221 + 4 * 96 * kMiB - 1);
}

TEST(NonPytorchTest, BufferSizeScalesTheProtocolBuffers) {
  model::Job job = SeedJob();
  const std::int64_t base = PartBytes(Estimate(job), "nccl.dp");
  job.memtune.env["NCCL_BUFFSIZE"] = "8388608";
  // The receive connector grows from align2M(4K + 512K + 4800K + 4M) = 10 MiB to 14 MiB on
  // each of the 24 ring channels.
  EXPECT_EQ(PartBytes(Estimate(job), "nccl.dp") - base, 24 * 4 * kMiB);
}

TEST(NonPytorchTest, ChannelLimitsShrinkEveryCommunicator) {
  model::Job job = SeedJob();
  const NonPytorchMemory base = Estimate(job);
  job.memtune.env["NCCL_MAX_NCHANNELS"] = "8";
  const NonPytorchMemory fewer = Estimate(job);
  // dp: init 2 MiB x (2 + 3 x 8) = 52 MiB, ring 8 x 12 MiB = 96 MiB.
  EXPECT_EQ(PartBytes(fewer, "nccl.dp"), (52 + 96) * kMiB);
  EXPECT_LT(fewer.KeyBytes("nccl"), base.KeyBytes("nccl"));
}

TEST(NonPytorchTest, EagerConnectionCostsAtLeastLazyOnEveryCommunicator) {
  model::Job job = SeedJob();
  const NonPytorchMemory lazy = Estimate(job);
  job.memtune.env["NCCL_RUNTIME_CONNECT"] = "0";
  const NonPytorchMemory eager = Estimate(job);
  ASSERT_EQ(lazy.parts.size(), eager.parts.size());
  for (std::size_t i = 0; i < lazy.parts.size(); ++i) {
    EXPECT_GE(eager.parts[i].bytes, lazy.parts[i].bytes) << lazy.parts[i].name;
  }
  // dp: ring + the shared p2p send pool 32 x 16 x 512 KiB = 256 MiB (NVLink chunk).
  EXPECT_EQ(PartBytes(eager, "nccl.dp") - PartBytes(lazy, "nccl.dp"), 256 * kMiB);
  // Without cuMem the per-channel structures are no longer 2 MiB granules.
  job.memtune.env.erase("NCCL_RUNTIME_CONNECT");
  job.memtune.env["NCCL_CUMEM_ENABLE"] = "0";
  const NonPytorchMemory no_cumem = Estimate(job);
  EXPECT_LT(PartBytes(no_cumem, "nccl.world"), PartBytes(eager, "nccl.world"));
}

TEST(NonPytorchTest, DataParallelSizeSetsTheGradientGroupsShape) {
  model::Job job = SeedJob();
  job.memtune.world_size = 64;  // DP 4 at stride TP = 4: ranks 0, 4, 8, 12 on two nodes
  std::vector<int> shape;
  for (const Comm& c : RankComms(job, 0, 8)) {
    if (c.name == "dp") shape = {c.ranks, c.nodes, c.local_ranks};
  }
  EXPECT_EQ(shape, (std::vector<int>{4, 2, 2}));
  // 16 channels across nodes: init 2 MiB x (2 + 3 x 16) = 100; ring 16 x (12 + 8 / 2) = 256
  // (half the channels send over the network at this GPU); the loss all-reduce takes tree:
  // 16 x 12 + 16 x 20 / 2 = 352 (MiB).
  EXPECT_EQ(PartBytes(Estimate(job), "nccl.dp"), (100 + 256 + 352) * kMiB);
}

TEST(NonPytorchTest, TpCommOverlapAddsUserbuffersAndBootstrapGroups) {
  model::Job job = SeedJob();
  const NonPytorchMemory on = Estimate(job);
  // FP8: 8 uint8 + 4 bf16 buffers of [4096 x 1, 8192] = 16 B per element, + 5 MiB.
  const std::int64_t elements = 4096LL * 8192;
  EXPECT_EQ(on.KeyBytes("te_userbuffers"), 16 * elements + 5 * kMiB);
  job.model.fp8 = model::Fp8Format::kNone;
  EXPECT_EQ(Estimate(job).KeyBytes("te_userbuffers"), 24 * elements + 5 * kMiB);
  // FP8 with bf16 first/last layers: Megatron-LM adds the bf16 quantization mode.
  job.model.fp8 = model::Fp8Format::kHybrid;
  job.model.first_last_layers_bf16 = true;
  job.model.num_layers_at_start_in_bf16 = 1;
  EXPECT_EQ(Estimate(job).KeyBytes("te_userbuffers"), (16 + 24) * elements + 5 * kMiB);
  job.model.tp_comm_overlap = false;
  const NonPytorchMemory off = Estimate(job);
  EXPECT_EQ(off.KeyBytes("te_userbuffers"), 0);
  EXPECT_EQ(PartBytes(off, "nccl.te_ub_world"), -1);
  EXPECT_EQ(PartBytes(off, "nccl.te_ub_tp"), -1);
}

TEST(NonPytorchTest, PartsComeInTheOrderTheyAppear) {
  const NonPytorchMemory m = Estimate(SeedJob());
  for (std::size_t i = 1; i < m.parts.size(); ++i) {
    EXPECT_LE(static_cast<int>(m.parts[i - 1].moment), static_cast<int>(m.parts[i].moment));
  }
  std::map<std::string, Moment> at;
  for (const Part& p : m.parts) at[p.name] = p.moment;
  EXPECT_EQ(at["te_userbuffers"], Moment::kStartup);
  EXPECT_EQ(at["nccl.world"], Moment::kStartup);
  EXPECT_EQ(at["nccl.tp"], Moment::kFirstForward);
  EXPECT_EQ(at["nccl.dp"], Moment::kFirstGradSync);  // overlap_grad_reduce
  EXPECT_EQ(at["nccl.dist_opt_instance"], Moment::kFirstOptimizerStep);
  for (const Part& p : m.parts) {
    EXPECT_LE(p.low_bytes, p.bytes) << p.name;
    EXPECT_LE(p.bytes, p.high_bytes) << p.name;
  }
}

TEST(NonPytorchTest, BadSettingsNameTheEntry) {
  model::Job job = SeedJob();
  job.memtune.env["NCCL_NVLS_ENABLE"] = "yes";
  auto m = EstimateNonPytorch(job, H100(), 0);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().field, "memtune.env.NCCL_NVLS_ENABLE");
  job.memtune.env.erase("NCCL_NVLS_ENABLE");
  job.memtune.versions.nccl = "3.0";
  m = EstimateNonPytorch(job, H100(), 0);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().field, "memtune.versions.nccl");
}

}  // namespace
}  // namespace memtune::nonpytorch

namespace memtune::nonpytorch {
namespace {

// Every communicator's shape is consistent with its placement, for layouts that do not
// fill whole nodes; a world of 20 GPUs in nodes of 8 has 3 nodes, the last holding 4.
TEST(NonPytorchTest, CommunicatorShapesAreConsistentWithThePlacement) {
  model::Job job = SeedJob();
  job.model.virtual_pipeline_model_parallel_size.reset();
  for (int tp : {1, 2, 4, 8}) {
    for (int pp : {1, 2, 5}) {
      for (int dp : {1, 2, 3}) {
        for (int gpn : {1, 4, 8}) {
          job.model.tensor_model_parallel_size = tp;
          job.model.pipeline_model_parallel_size = pp;
          job.memtune.world_size = tp * pp * dp;
          for (int r = 0; r < pp; ++r) {
            for (const Comm& c : RankComms(job, r, gpn)) {
              const int g = std::min(gpn, job.memtune.world_size);
              SCOPED_TRACE(c.name + " tp" + std::to_string(tp) + " pp" + std::to_string(pp) +
                           " dp" + std::to_string(dp) + " gpn" + std::to_string(gpn));
              EXPECT_GE(c.ranks, 2);
              EXPECT_GE(c.local_ranks, 1);
              EXPECT_LE(c.local_ranks, std::min(c.ranks, g));
              EXPECT_GE(c.nodes, (c.ranks + g - 1) / g);
              EXPECT_LE(c.nodes, c.ranks);
              EXPECT_LE(c.ranks, c.local_ranks + (c.nodes - 1) * g);
            }
          }
        }
      }
    }
  }
  job.model.tensor_model_parallel_size = 4;
  job.model.pipeline_model_parallel_size = 5;
  job.memtune.world_size = 20;  // DP 1: pipeline rank 4 is global rank 16, on node 2
  for (int r : {0, 4}) {
    for (const Comm& c : RankComms(job, r, 8)) {
      if (c.name != "world") continue;
      EXPECT_EQ(c.nodes, 3);
      EXPECT_EQ(c.local_ranks, r == 0 ? 8 : 4);
    }
  }
}

}  // namespace
}  // namespace memtune::nonpytorch

namespace memtune::nonpytorch {
namespace {

// model.batch_p2p_comm decides between the pipeline group's batched send/recv and one
// 2-rank communicator per peer; without interleaving the end stages have one peer.
TEST(NonPytorchTest, BatchedPipelineSendsUseThePipelineGroup) {
  model::Job job = SeedJob();  // VPP 5: unbatched by default
  job.model.batch_p2p_comm = true;
  auto names = CommNames(job, 0);
  EXPECT_EQ(std::count(names.begin(), names.end(), "pp_pair.next"), 0);
  job.model.virtual_pipeline_model_parallel_size.reset();
  job.model.batch_p2p_comm = false;
  names = CommNames(job, 0);  // first stage: the next one only
  EXPECT_EQ(std::count(names.begin(), names.end(), "pp_pair.next"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "pp_pair.prev"), 0);
  names = CommNames(job, 3);  // last stage: the previous one only
  EXPECT_EQ(std::count(names.begin(), names.end(), "pp_pair.next"), 0);
  EXPECT_EQ(std::count(names.begin(), names.end(), "pp_pair.prev"), 1);
}

}  // namespace
}  // namespace memtune::nonpytorch

namespace memtune::nonpytorch {
namespace {

// torchtitan FSDP2 with PP 2 on 16 GPUs (2 nodes of 8): each stage's ranks all-gather over
// their own shard group, and the stages send activations over the pipeline group, whose
// peers sit on the other node (the pp mesh dimension is the outermost).
TEST(NonPytorchTest, Fsdp2PipelineStagesHaveTheirOwnGroupsAndAPipelinePair) {
  auto doc = model::ParseJobText(
      "model: {preset: llama3-8b, pipeline_model_parallel_size: 2}\n"
      "train: {micro_batch_size: 1, global_batch_size: 16}\n"
      "memtune: {framework: fsdp2, world_size: 16, gpu: h100}\n");
  ASSERT_TRUE(doc.has_value()) << doc.error().Describe();
  for (int rank = 0; rank < 2; ++rank) {
    std::map<std::string, Comm> comms;
    for (const Comm& c : RankComms(doc->job, rank, 8)) comms[c.name] = c;
    ASSERT_EQ(comms.count("pp"), 1u);
    EXPECT_EQ(comms["pp"].ranks, 2);
    EXPECT_EQ(comms["pp"].nodes, 2);
    EXPECT_EQ(comms["pp"].p2p_peers_remote, 1);
    EXPECT_EQ(comms["pp"].p2p_peers_local, 0);
    EXPECT_EQ(comms["dp_shard_cp"].ranks, 8);
    EXPECT_EQ(comms["dp_shard_cp"].nodes, 1);
    EXPECT_EQ(comms["dp_shard_cp"].local_ranks, 8);
  }
}

}  // namespace
}  // namespace memtune::nonpytorch
