// IdCache: hits, misses, eviction by a colliding id, and the extreme ids.
#include "snapshot/id_cache.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace memtune::snapshot {
namespace {

TEST(IdCacheTest, EmptyCacheMissesEveryId) {
  IdCache<int, 8> cache;
  EXPECT_EQ(cache.Find(0), nullptr);
  EXPECT_EQ(cache.Find(7), nullptr);
  EXPECT_EQ(cache.Find(0xffffffffu), nullptr);  // no id looks like an empty slot
}

TEST(IdCacheTest, FindReturnsWhatPutStored) {
  IdCache<int, 8> cache;
  cache.Put(0, 10);
  cache.Put(0xffffffffu, 20);
  ASSERT_NE(cache.Find(0), nullptr);
  EXPECT_EQ(*cache.Find(0), 10);
  ASSERT_NE(cache.Find(0xffffffffu), nullptr);
  EXPECT_EQ(*cache.Find(0xffffffffu), 20);
  cache.Put(0, 11);  // a later Put for the same id replaces the value
  EXPECT_EQ(*cache.Find(0), 11);
}

TEST(IdCacheTest, CollidingIdEvictsAndNeverAliases) {
  IdCache<int, 2> cache;  // three ids, two slots: some pair shares a slot
  for (std::uint32_t id = 0; id < 3; ++id) cache.Put(id, static_cast<int>(id) + 100);
  int hits = 0;
  for (std::uint32_t id = 0; id < 3; ++id) {
    if (const int* v = cache.Find(id)) {
      EXPECT_EQ(*v, static_cast<int>(id) + 100);  // a hit is always the id's own value
      ++hits;
    }
  }
  EXPECT_GE(hits, 1);
  EXPECT_LE(hits, 2);
  EXPECT_EQ(*cache.Find(2), 102);  // the last Put always survives
}

}  // namespace
}  // namespace memtune::snapshot
