// IdArray: append across growth, truncation, reserve, and indexed writes.
#include "snapshot/id_array.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace memtune::snapshot {
namespace {

TEST(IdArrayTest, StartsEmpty) {
  IdArray a;
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.capacity(), 0u);
}

TEST(IdArrayTest, AppendsKeepOrderAcrossGrowth) {
  IdArray a;
  constexpr std::uint32_t kCount = 1000;  // several doublings past the first 64
  for (std::uint32_t i = 0; i < kCount; ++i) a.push_back(i * 3);
  ASSERT_EQ(a.size(), kCount);
  EXPECT_GE(a.capacity(), kCount);
  for (std::uint32_t i = 0; i < kCount; ++i) ASSERT_EQ(a[i], i * 3) << i;
  EXPECT_EQ(a.back(), (kCount - 1) * 3);
  EXPECT_EQ(a.data()[10], 30u);
}

TEST(IdArrayTest, PopTruncateAndOverwrite) {
  IdArray a;
  for (std::uint32_t i = 0; i < 5; ++i) a.push_back(i);
  a.pop_back();
  EXPECT_EQ(a.back(), 3u);
  a.Truncate(2);
  EXPECT_EQ(a.size(), 2u);
  a.push_back(9);  // reuses the slot that held 2
  EXPECT_EQ(a[2], 9u);
  a[0] = 7;
  EXPECT_EQ(a[0], 7u);
  a.Truncate(0);
  EXPECT_TRUE(a.empty());
}

TEST(IdArrayTest, ReserveKeepsContentsAndNeverShrinks) {
  IdArray a;
  a.push_back(1);
  a.push_back(2);
  a.reserve(500);
  EXPECT_GE(a.capacity(), 500u);
  const std::size_t capacity = a.capacity();
  a.reserve(10);
  EXPECT_EQ(a.capacity(), capacity);
  EXPECT_EQ(a[0], 1u);
  EXPECT_EQ(a[1], 2u);
}

}  // namespace
}  // namespace memtune::snapshot
