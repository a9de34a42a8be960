// Kernel and collective timing rules (steptime/kernels.h).
#include "steptime/kernels.h"

#include <gtest/gtest.h>

namespace memtune::steptime {
namespace {

Hardware H100() {
  model::Job job;
  job.memtune.gpu = "h100-sxm-80gb";
  job.memtune.gpus_per_node = 8;
  auto hw = JobHardware(job);
  EXPECT_TRUE(hw.has_value());
  return *hw;
}

double Rate(double m, double n, double k, GemmDtype dtype, const Hardware& hw) {
  return 2 * m * n * k / GemmSeconds(m, n, k, dtype, hw);
}

TEST(GemmTest, LargeGemmsReachTheLargeGemmEfficiency) {
  const Hardware hw = H100();
  const double bf16 = Rate(8192, 8192, 8192, GemmDtype::kBf16, hw);
  EXPECT_GT(bf16, 0.7 * hw.bf16_flops);
  EXPECT_LE(bf16, kGemmEfficiencyBf16 * hw.bf16_flops);
  EXPECT_GT(Rate(8192, 8192, 8192, GemmDtype::kFp8, hw), 1.5 * bf16);
}

TEST(GemmTest, SmallKAndFewTilesLowerTheRate) {
  const Hardware hw = H100();
  // The same FLOPs with a short K loop (prologue) or too few output tiles (idle SMs).
  EXPECT_LT(Rate(4096, 8192, 1024, GemmDtype::kFp8, hw),
            0.9 * Rate(4096, 8192, 8192, GemmDtype::kFp8, hw));
  EXPECT_LT(Rate(512, 1280, 8192, GemmDtype::kFp8, hw),
            0.8 * Rate(4096, 2560, 8192, GemmDtype::kFp8, hw));
}

TEST(GemmTest, NarrowGemmsAreMemoryBound) {
  const Hardware hw = H100();
  // [8192 x 32] x [32 x 8192]: 4 GFLOP but 128 MiB of output.
  const double t = GemmSeconds(8192, 8192, 32, GemmDtype::kBf16, hw);
  EXPECT_GT(t, 8192.0 * 8192 * 2 / hw.hbm_bytes_per_s);
}

TEST(LinkTest, NvlinkInsideTheDomainNetworkAcross) {
  const Hardware hw = H100();
  EXPECT_TRUE(GroupLink(8, 1, hw).nvlink);   // TP 8 in one node
  EXPECT_FALSE(GroupLink(4, 8, hw).nvlink);  // DP 4 across 4 nodes
  // One member per node: one NIC per ring crossing.
  EXPECT_NEAR(GroupLink(4, 8, hw).bytes_per_s, hw.network_bytes_per_s * kNetworkEfficiency, 1);
  // Four members per node share four NICs, up to NVLink.
  EXPECT_NEAR(GroupLink(16, 2, hw).bytes_per_s, 4 * hw.network_bytes_per_s * kNetworkEfficiency, 1);
}

TEST(LinkTest, Nvl72IsOneDomain) {
  model::Job job;
  job.memtune.gpu = "gb200";
  job.memtune.gpus_per_node = 4;
  auto hw = JobHardware(job);
  ASSERT_TRUE(hw.has_value());
  EXPECT_TRUE(GroupLink(64, 1, *hw).nvlink);
  EXPECT_FALSE(GroupLink(64, 2, *hw).nvlink);
  // 36 members per domain: the NICs out-run NVLink, so NVLink bounds the ring.
  EXPECT_NEAR(GroupLink(64, 2, *hw).bytes_per_s, hw->nvlink_bytes_per_s * kNvlinkEfficiency, 1);
}

TEST(CollectiveTest, AllReduceSendsTwiceAReduceScatter) {
  const Hardware hw = H100();
  const Link link = GroupLink(8, 1, hw);
  const double rs = CollectiveSeconds(Collective::kReduceScatter, 1e9, 8, link);
  const double ar = CollectiveSeconds(Collective::kAllReduce, 1e9, 8, link);
  EXPECT_NEAR(ar - link.latency_s, 2 * (rs - link.latency_s), 1e-9);
  EXPECT_EQ(CollectiveSeconds(Collective::kAllGather, 1e9, 1, link), 0);
}

TEST(HardwareTest, MissingGpuNamesTheField) {
  model::Job job;
  auto hw = JobHardware(job);
  ASSERT_FALSE(hw.has_value());
  EXPECT_EQ(hw.error().field, "memtune.gpu");
}

}  // namespace
}  // namespace memtune::steptime
