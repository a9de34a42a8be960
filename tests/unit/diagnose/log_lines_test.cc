// Memory lines of Megatron, torchtitan and DeepSpeed logs; leak and imbalance trends.
#include "memtune/diagnose/log_lines.h"

#include <gtest/gtest.h>

namespace memtune::diagnose {
namespace {

constexpr std::int64_t kMiB = 1LL << 20;
constexpr std::int64_t kGiB = 1LL << 30;

std::string MegatronLine(int rank, int iteration, double allocated_mb, double max_reserved_mb) {
  return "[Rank " + std::to_string(rank) + "] (after " + std::to_string(iteration) +
         " iterations) memory (MB) | allocated: " + std::to_string(allocated_mb) +
         " | max allocated: " + std::to_string(allocated_mb * 2) +
         " | reserved: " + std::to_string(max_reserved_mb) +
         " | max reserved: " + std::to_string(max_reserved_mb) + "\n";
}

TEST(LogLinesTest, MegatronMemoryLine) {
  const LogMemory log = ParseLogMemory(
      " [Rank 6] (after 10 iterations) memory (MB) | allocated: 1536.5 | max allocated: 4096.0 | "
      "reserved: 5120.0 | max reserved: 6144.0\n");
  ASSERT_EQ(log.samples.size(), 1u);
  const MemorySample& s = log.samples[0];
  EXPECT_EQ(s.format, LogFormat::kMegatron);
  EXPECT_EQ(s.rank, 6);
  EXPECT_EQ(s.iteration, 10);
  EXPECT_EQ(s.allocated_bytes, static_cast<std::int64_t>(1536.5 * kMiB));
  EXPECT_EQ(s.max_allocated_bytes, 4096 * kMiB);
  EXPECT_EQ(s.reserved_bytes, 5120 * kMiB);
  EXPECT_EQ(s.max_reserved_bytes, 6144 * kMiB);
  EXPECT_EQ(s.peak_bytes(), 6144 * kMiB);
}

TEST(LogLinesTest, OldRawFloatAndGbForms) {
  const LogMemory log = ParseLogMemory(
      "after 5 iterations memory (MB) | allocated: 100.25 | max allocated: 200.0 | reserved: "
      "300.0 | max reserved: 300.0\n"
      "[Rank 1] (after 20 iterations) memory (GB) | allocated: 1.5 | max allocated: 2.0 | "
      "reserved: 3.0 | max reserved: 3.5\n");
  ASSERT_EQ(log.samples.size(), 2u);
  EXPECT_EQ(log.samples[0].rank, -1);
  EXPECT_EQ(log.samples[0].iteration, 5);
  EXPECT_EQ(log.samples[0].allocated_bytes, static_cast<std::int64_t>(100.25 * kMiB));
  EXPECT_EQ(log.samples[1].max_reserved_bytes, static_cast<std::int64_t>(3.5 * kGiB));
}

TEST(LogLinesTest, BridgeGigabyteLineIsDecimal) {
  const LogMemory log = ParseLogMemory(
      "[Rank 3] (after 2 iterations) memory (GB) | mem-allocated-gigabytes: 40.5 | "
      "mem-active-gigabytes: 40.5 | mem-inactive-gigabytes: 2.0 | mem-reserved-gigabytes: 70.25 | "
      "mem-max-allocated-gigabytes: 61.0 | mem-max-active-gigabytes: 62.0 | "
      "mem-max-inactive-gigabytes: 3.0 | mem-max-reserved-gigabytes: 71.5 | mem-alloc-retires: 0 "
      "| mem-allocated-count: 512\n");
  ASSERT_EQ(log.samples.size(), 1u);
  const MemorySample& s = log.samples[0];
  EXPECT_EQ(s.rank, 3);
  EXPECT_EQ(s.iteration, 2);
  EXPECT_EQ(s.allocated_bytes, 40500000000);
  EXPECT_EQ(s.max_allocated_bytes, 61000000000);
  EXPECT_EQ(s.reserved_bytes, 70250000000);
  EXPECT_EQ(s.max_reserved_bytes, 71500000000);
}

TEST(LogLinesTest, TorchtitanDeepSpeedTheoreticalAndArguments) {
  const LogMemory log = ParseLogMemory(
      "[rank2]:[titan] 2025-01-01 00:00:00,000 - root - INFO - step:  7  loss:  3.2100  "
      "memory: 61.50GiB(77.72%)  tps: 1,234\n"
      "[INFO] [utils.py:800:see_memory_usage] MA 12.5 GB         Max_MA 14.0 GB         CA 15.0 "
      "GB         Max_CA 16 GB \n"
      "Theoretical memory footprints: weight and optimizer=20480.00 MB, activation=10240.00 MB, "
      "total=30720.00 MB\n"
      "  pipeline_model_parallel_size .................... 4\n"
      "  world_size ...................................... 16\n");
  ASSERT_EQ(log.samples.size(), 2u);
  EXPECT_EQ(log.samples[0].format, LogFormat::kTorchtitan);
  EXPECT_EQ(log.samples[0].rank, 2);
  EXPECT_EQ(log.samples[0].iteration, 7);
  EXPECT_EQ(log.samples[0].max_reserved_bytes, static_cast<std::int64_t>(61.5 * kGiB));
  EXPECT_DOUBLE_EQ(*log.samples[0].capacity_percent, 77.72);
  EXPECT_EQ(log.samples[1].format, LogFormat::kDeepSpeed);
  EXPECT_EQ(log.samples[1].allocated_bytes, static_cast<std::int64_t>(12.5 * kGiB));
  EXPECT_EQ(log.samples[1].max_allocated_bytes, 14 * kGiB);
  EXPECT_EQ(log.samples[1].reserved_bytes, 15 * kGiB);
  EXPECT_EQ(log.samples[1].max_reserved_bytes, 16 * kGiB);
  ASSERT_TRUE(log.theoretical.has_value());
  EXPECT_EQ(log.theoretical->weight_and_optimizer_bytes, 20 * kGiB);
  EXPECT_EQ(log.theoretical->activation_bytes, 10 * kGiB);
  EXPECT_EQ(log.theoretical->total_bytes, 30 * kGiB);
  EXPECT_EQ(log.pipeline_parallel_size, 4);
  EXPECT_EQ(log.world_size, 16);
}

TEST(LogLinesTest, LeakNeedsSteadyGrowthAfterWarmUp) {
  std::string text;
  for (int it = 10; it <= 50; it += 10) text += MegatronLine(0, it, 1000.0 + 100.0 * it, 9000.0);
  auto leak = FindLeak(ParseLogMemory(text).samples);
  ASSERT_TRUE(leak.has_value());
  EXPECT_EQ(leak->rank, 0);
  EXPECT_EQ(leak->growth_bytes, 3000 * kMiB);  // iteration 20 -> 50

  // Growth in the warm-up report only, then flat: no leak.
  std::string flat = MegatronLine(0, 1, 500.0, 9000.0);
  for (int it = 10; it <= 40; it += 10) flat += MegatronLine(0, it, 4000.0, 9000.0);
  EXPECT_FALSE(FindLeak(ParseLogMemory(flat).samples).has_value());
}

TEST(LogLinesTest, ImbalanceNamesTheRankAndStage) {
  std::string text;
  for (int rank = 0; rank < 8; ++rank) {
    text += MegatronLine(rank, 100, 2000.0, rank == 5 ? 70000.0 : 40000.0);
  }
  auto imb = FindImbalance(ParseLogMemory(text).samples);
  ASSERT_TRUE(imb.has_value());
  EXPECT_EQ(imb->rank, 5);
  EXPECT_EQ(imb->ranks, 8);
  EXPECT_EQ(imb->median_bytes, 40000 * kMiB);
  EXPECT_EQ(PipelineStage(5, 8, 4), 2);
  EXPECT_FALSE(PipelineStage(5, 8, 3).has_value());

  std::string even;
  for (int rank = 0; rank < 4; ++rank) even += MegatronLine(rank, 100, 2000.0, 40000.0 + rank);
  EXPECT_FALSE(FindImbalance(ParseLogMemory(even).samples).has_value());

  // Readings near the int64 limit (fuzz finding: the median of two overflowed).
  const std::string huge =
      MegatronLine(0, 10, 2000.0, 5207211111110.0) + MegatronLine(1, 10, 2000.0, 5207211111110.0) +
      MegatronLine(2, 10, 2000.0, 40000.0) + MegatronLine(3, 10, 2000.0, 40000.0);
  auto far = FindImbalance(ParseLogMemory(huge).samples);
  ASSERT_TRUE(far.has_value());
  EXPECT_EQ(far->median_bytes, 40000 * kMiB + (5207211111110 - 40000) / 2 * kMiB);
}

}  // namespace
}  // namespace memtune::diagnose
