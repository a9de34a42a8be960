// Policy functions alone, with hand-derived expectations from allocator.md sections 1-4.
#include "memtune/alloc/policy.h"

#include <gtest/gtest.h>

namespace memtune::alloc {
namespace {

AllocatorConfig Cfg(std::string_view s = "", TorchVersion v = kDefaultTorchVersion) {
  auto c = ParseAllocatorConfig(s, v);
  EXPECT_TRUE(c.has_value()) << (c ? "" : c.error().Describe());
  return c ? *c : AllocatorConfig{};
}

TEST(RoundSizeTest, PlainRoundingTo512) {
  const auto c = Cfg();
  EXPECT_EQ(RoundSize(1, c), 512);
  EXPECT_EQ(RoundSize(511, c), 512);
  EXPECT_EQ(RoundSize(512, c), 512);
  EXPECT_EQ(RoundSize(513, c), 1024);
  EXPECT_EQ(RoundSize(1048577, c), 1049088);
  EXPECT_EQ(RoundSize(10 * kMiB + 1, c), 10 * kMiB + 512);
}

TEST(RoundSizeTest, PowerOfTwoDivisionsSingleValue) {
  const auto c = Cfg("roundup_power2_divisions:4");
  EXPECT_EQ(RoundSize(5000, c), 5120);  // f = 4096, step 1024
  EXPECT_EQ(RoundSize(1200, c), 1536);  // 1200 <= 512 * 4: plain rounding (allocator.md 1.2)
  EXPECT_EQ(RoundSize(4096, c), 4096);  // powers of two stay
  EXPECT_EQ(RoundSize(5 * kMiB + 1, c), 6 * kMiB);  // f = 4 MiB, step 1 MiB: 5 MiB + 1 -> 6 MiB
  EXPECT_EQ(RoundSize(5 * kMiB, c), 5 * kMiB);      // already on a step
}

TEST(RoundSizeTest, NextDivisionHelper) {
  EXPECT_EQ(RoundupPower2NextDivision(5000, 4), 5120);
  EXPECT_EQ(RoundupPower2NextDivision(5120, 4), 5120);
  EXPECT_EQ(RoundupPower2NextDivision(3 * kMiB + 1, 2), 4 * kMiB);
  EXPECT_EQ(RoundupPower2NextDivision(3 * kMiB + 1, 8), 3 * kMiB + 256 * kKiB);
}

TEST(RoundSizeTest, IntervalIndex) {
  EXPECT_EQ(RoundupIntervalIndex(512), 0);
  EXPECT_EQ(RoundupIntervalIndex(2 * kMiB - 1), 0);
  EXPECT_EQ(RoundupIntervalIndex(2 * kMiB), 1);
  EXPECT_EQ(RoundupIntervalIndex(1 * kGiB), 10);
  EXPECT_EQ(RoundupIntervalIndex(32 * kGiB), 15);
  EXPECT_EQ(RoundupIntervalIndex(200 * kGiB), 15);
}

TEST(RoundSizeTest, ListFormPerInterval) {
  // [256:1,512:2,1024:4,>:8] in 2.9+: index 0..8 = 1 (first pair fills below), 9 = 2, 10 = 4,
  // 11..15 = 8.
  const auto c = Cfg("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", {2, 9});
  EXPECT_EQ(c.roundup_power2_divisions[0], 1);
  EXPECT_EQ(c.roundup_power2_divisions[8], 1);
  EXPECT_EQ(c.roundup_power2_divisions[9], 2);
  EXPECT_EQ(c.roundup_power2_divisions[10], 4);
  EXPECT_EQ(c.roundup_power2_divisions[11], 8);
  EXPECT_EQ(c.roundup_power2_divisions[15], 8);
  // 600 MiB + 1 is in interval 9 (512 MiB..1 GiB), d = 2: next half step is 768 MiB.
  EXPECT_EQ(RoundSize(600 * kMiB + 1, c), 768 * kMiB);
  // 1000 B in interval 0 with d = 1: plain 512 rounding in 2.4+.
  EXPECT_EQ(RoundSize(1000, c), 1024);
}

TEST(RoundSizeTest, GreaterThanFillDiffersBefore29) {
  const auto old_cfg = Cfg("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", {2, 8});
  const auto new_cfg = Cfg("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", {2, 9});
  EXPECT_EQ(old_cfg.roundup_power2_divisions[10], 8);  // cfg-old overwrites the last entry
  EXPECT_EQ(new_cfg.roundup_power2_divisions[10], 4);
}

TEST(RoundSizeTest, DivisionOfOneKeepsSizeBefore24) {
  // 2.1-2.3: guard d > 0 and the helper returns n unchanged for d <= 1.
  const auto c22 = Cfg("roundup_power2_divisions:[1:1]", {2, 2});
  EXPECT_EQ(RoundSize(1000, c22), 1000);
  const auto c24 = Cfg("roundup_power2_divisions:[1:1]", {2, 4});
  EXPECT_EQ(RoundSize(1000, c24), 1024);
}

TEST(PoolTest, OneMiBExactlyIsSmall) {
  EXPECT_EQ(PoolFor(512), PoolKind::kSmall);
  EXPECT_EQ(PoolFor(kMiB), PoolKind::kSmall);
  EXPECT_EQ(PoolFor(kMiB + 512), PoolKind::kLarge);
}

TEST(AllocationSizeTest, SegmentSizes) {
  const auto c = Cfg();
  EXPECT_EQ(AllocationSize(512, c), 2 * kMiB);
  EXPECT_EQ(AllocationSize(kMiB, c), 2 * kMiB);
  EXPECT_EQ(AllocationSize(kMiB + 512, c), 20 * kMiB);
  EXPECT_EQ(AllocationSize(9 * kMiB, c), 20 * kMiB);
  EXPECT_EQ(AllocationSize(10 * kMiB, c), 10 * kMiB);
  EXPECT_EQ(AllocationSize(10 * kMiB + 512, c), 12 * kMiB);
  EXPECT_EQ(AllocationSize(30 * kMiB + 512, c), 32 * kMiB);
  const auto main_cfg = Cfg("large_segment_size_mb:64", TorchVersion{2, TorchVersion::kMainMinor});
  EXPECT_EQ(AllocationSize(3 * kMiB, main_cfg), 64 * kMiB);
}

TEST(ShouldSplitTest, WorkedTableOfSection16) {
  const std::int64_t mss = kUnlimitedBytes;
  EXPECT_TRUE(ShouldSplit(2 * kMiB, 512, PoolKind::kSmall, false, mss));
  EXPECT_TRUE(ShouldSplit(2 * kMiB, kMiB, PoolKind::kSmall, false, mss));
  EXPECT_TRUE(ShouldSplit(20 * kMiB, 1049088, PoolKind::kLarge, false, mss));
  EXPECT_TRUE(ShouldSplit(20 * kMiB, 9 * kMiB, PoolKind::kLarge, false, mss));
  EXPECT_FALSE(ShouldSplit(10 * kMiB, 10 * kMiB, PoolKind::kLarge, false, mss));
  EXPECT_TRUE(ShouldSplit(12 * kMiB, 10 * kMiB + 512, PoolKind::kLarge, false, mss));
  EXPECT_FALSE(
      ShouldSplit(12 * kMiB, 11 * kMiB + 512, PoolKind::kLarge, false, mss));  // rest <= 1 MiB
  EXPECT_TRUE(ShouldSplit(32 * kMiB, 30 * kMiB + 512, PoolKind::kLarge, false, mss));
}

TEST(ShouldSplitTest, ThresholdsAreExact) {
  const std::int64_t mss = kUnlimitedBytes;
  EXPECT_FALSE(ShouldSplit(5 * kMiB, 4 * kMiB, PoolKind::kLarge, false, mss));  // rest == 1 MiB
  EXPECT_TRUE(ShouldSplit(5 * kMiB + 512, 4 * kMiB, PoolKind::kLarge, false, mss));  // rest > 1 MiB
  EXPECT_FALSE(ShouldSplit(1024, 1024 - 511, PoolKind::kSmall, false, mss));         // rest 511
  EXPECT_TRUE(ShouldSplit(1024, 512, PoolKind::kSmall, false, mss));                 // rest 512
  EXPECT_TRUE(ShouldSplit(5 * kMiB, 4 * kMiB, PoolKind::kLarge, true, mss));         // expandable
  // Oversize requests are never split in native mode.
  EXPECT_FALSE(ShouldSplit(300 * kMiB, 200 * kMiB, PoolKind::kLarge, false, 128 * kMiB));
  EXPECT_TRUE(ShouldSplit(300 * kMiB, 100 * kMiB, PoolKind::kLarge, false, 128 * kMiB));
}

TEST(OversizeTest, RulesUseGreaterOrEqual) {
  const std::int64_t mss = 128 * kMiB, nsr = 20 * kMiB;
  EXPECT_FALSE(
      OversizeRulesAllow(100 * kMiB, 128 * kMiB, mss, nsr));  // normal request, oversize block
  EXPECT_TRUE(OversizeRulesAllow(100 * kMiB, 128 * kMiB - 512, mss, nsr));
  EXPECT_TRUE(OversizeRulesAllow(128 * kMiB, 148 * kMiB - 512, mss, nsr));
  EXPECT_FALSE(OversizeRulesAllow(128 * kMiB, 148 * kMiB, mss, nsr));  // exactly NSR bigger
}

TEST(PagesTest, MapRoundsOutUnmapRoundsIn) {
  const std::int64_t P = 20 * kMiB;
  PageRange m = PagesToMap(0, 5 * kMiB, P);
  EXPECT_EQ(m.first, 0);
  EXPECT_EQ(m.last, 1);
  m = PagesToMap(40 * kMiB, 21 * kMiB, P);
  EXPECT_EQ(m.first, 2);
  EXPECT_EQ(m.last, 4);
  PageRange u = PagesToUnmap(5 * kMiB, 50 * kMiB, P);  // [5, 55): only page [20, 40) is whole
  EXPECT_EQ(u.first, 1);
  EXPECT_EQ(u.last, 2);
  u = PagesToUnmap(5 * kMiB, 30 * kMiB, P);  // [5, 35): no whole page
  EXPECT_EQ(u.count(), 0);
  EXPECT_EQ(ExpandableReservationBytes(80 * kGiB, P), 90 * kGiB);
  EXPECT_EQ(ExpandableReservationBytes(10 * kMiB, 2 * kMiB), 12 * kMiB);  // ceil(11.25 MiB / 2)
}

TEST(GcTest, PassesFreeBlocksAtOrAboveAverageAge) {
  // Ages 10, 2, 6 (avg 6): the first pass frees 10 and 6 (16 MiB); target 10 MiB reached.
  std::vector<GcCandidate> c = {{4 * kMiB, 10}, {8 * kMiB, 2}, {12 * kMiB, 6}};
  EXPECT_EQ(SelectGcVictims(c, 10 * kMiB), (std::vector<std::size_t>{0, 2}));
  // Target 20 MiB needs a second pass, which frees the remaining block.
  EXPECT_EQ(SelectGcVictims(c, 20 * kMiB), (std::vector<std::size_t>{0, 2, 1}));
  EXPECT_TRUE(SelectGcVictims({}, 10).empty());
}

}  // namespace
}  // namespace memtune::alloc
