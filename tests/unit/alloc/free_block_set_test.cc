// FreeBlockSet (block.h): order, lookups, erase, split remainders, and a randomized
// comparison with std::set over many group creations and removals.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "memtune/alloc/block.h"

namespace memtune::alloc {
namespace {

using Tuple = std::tuple<StreamId, std::int64_t, std::uint64_t, BlockId>;

std::vector<Tuple> Contents(const FreeBlockSet& set) {
  std::vector<Tuple> out;
  set.ForEach([&](const FreeKey& k) { out.emplace_back(k.stream(), k.size(), k.ptr, k.id); });
  return out;
}

TEST(FreeKeyTest, OrdersByStreamThenSizeThenAddress) {
  EXPECT_LT(FreeKey(0, 4096, 0x9000, 1), FreeKey(1, 512, 0x1000, 2));
  EXPECT_LT(FreeKey(1, 512, 0x9000, 1), FreeKey(1, 1024, 0x1000, 2));
  EXPECT_LT(FreeKey(1, 512, 0x1000, 1), FreeKey(1, 512, 0x2000, 2));
  EXPECT_FALSE(FreeKey(1, 512, 0x1000, 1) < FreeKey(1, 512, 0x1000, 2));  // id not ordered
  // Streams compare as unsigned: an id with the top bit set sorts last.
  EXPECT_LT(FreeKey(1, 512, 0x1000, 1), FreeKey(~StreamId{0}, 512, 0x1000, 2));
}

TEST(FreeBlockSetTest, LowerBoundFindsSmallestFitOnTheStream) {
  FreeBlockSet set;
  set.Insert(FreeKey(0, 2048, 0x3000, 0));
  set.Insert(FreeKey(0, 1024, 0x2000, 1));
  set.Insert(FreeKey(0, 1024, 0x1000, 2));
  set.Insert(FreeKey(7, 512, 0x4000, 3));
  EXPECT_EQ(set.size(), 4u);
  EXPECT_EQ(set.At(set.LowerBound(0, 1000)).id, 2);  // same size: lowest address first
  EXPECT_EQ(set.At(set.LowerBound(0, 1025)).id, 0);
  EXPECT_EQ(set.At(set.LowerBound(0, 4096)).id, 3);  // past stream 0: the caller checks
  EXPECT_TRUE(set.IsEnd(set.LowerBound(7, 513)));
}

TEST(FreeBlockSetTest, EraseAndContainsUseTheExactKey) {
  FreeBlockSet set;
  set.Insert(FreeKey(0, 1024, 0x1000, 4));
  set.Insert(FreeKey(0, 1024, 0x2000, 5));
  EXPECT_TRUE(set.Contains(FreeKey(0, 1024, 0x2000, 5)));
  EXPECT_FALSE(set.Contains(FreeKey(0, 1024, 0x2000, 4)));  // wrong id
  EXPECT_FALSE(set.Contains(FreeKey(0, 2048, 0x2000, 5)));  // stale size
  set.Erase(FreeKey(0, 1024, 0x1000, 4));
  EXPECT_FALSE(set.Contains(FreeKey(0, 1024, 0x1000, 4)));
  EXPECT_EQ(Contents(set), (std::vector<Tuple>{{0, 1024, 0x2000, 5}}));
  set.Erase(FreeKey(0, 1024, 0x2000, 5));
  EXPECT_TRUE(set.empty());
  EXPECT_TRUE(set.IsEnd(set.LowerBound(0, 0)));
  set.Insert(FreeKey(0, 512, 0x1000, 4));  // ids and emptied groups are reused
  EXPECT_EQ(Contents(set), (std::vector<Tuple>{{0, 512, 0x1000, 4}}));
}

TEST(FreeBlockSetTest, ReplaceAtMovesASplitRemainderIntoPlace) {
  FreeBlockSet set;
  const int n = 96;  // many groups
  for (int i = 0; i < n; ++i) set.Insert(FreeKey(0, 1024 * (i + 1), 0x100000 * i, i));
  // The largest block shrinks below every other: it must move to the front group.
  FreeBlockSet::Pos last = set.LowerBound(0, 1024 * n);
  ASSERT_EQ(set.At(last).id, n - 1);
  set.ReplaceAt(last, FreeKey(0, 512, 0x100000 * (n - 1) + 0x800, n - 1));
  EXPECT_EQ(set.At(set.Begin()).id, n - 1);
  // A block shrinks to a size between two existing groups.
  FreeBlockSet::Pos p = set.LowerBound(0, 1024 * 3);
  set.ReplaceAt(p, FreeKey(0, 1536, 0x200000 + 0x800, 2));
  EXPECT_EQ(set.At(set.LowerBound(0, 1500)).id, 2);
  set.Erase(FreeKey(0, 1536, 0x200000 + 0x800, 2));  // found where ReplaceAt put it
  set.Erase(FreeKey(0, 512, 0x100000 * (n - 1) + 0x800, n - 1));
  EXPECT_EQ(set.size(), static_cast<std::size_t>(n - 2));
}

TEST(FreeBlockSetTest, ReplaceMovesJoinsOrLeavesGroups) {
  FreeBlockSet set;
  const auto a = set.Insert(FreeKey(0, 1024, 0x1000, 1));
  set.Insert(FreeKey(0, 2048, 0x2000, 2));
  const auto c = set.Insert(FreeKey(0, 4096, 0x3000, 3));
  // A lone key grows past another group: its group moves up.
  const auto a2 = set.Replace(a, 0x1000, 1, 3072, 0x1000, 1);
  EXPECT_EQ(Contents(set),
            (std::vector<Tuple>{{0, 2048, 0x2000, 2}, {0, 3072, 0x1000, 1}, {0, 4096, 0x3000, 3}}));
  // A lone key shrinks onto an existing size: it joins that group, lowest address first.
  const auto c2 = set.Replace(c, 0x3000, 3, 2048, 0x0800, 3);
  EXPECT_EQ(Contents(set),
            (std::vector<Tuple>{{0, 2048, 0x0800, 3}, {0, 2048, 0x2000, 2}, {0, 3072, 0x1000, 1}}));
  EXPECT_EQ(set.At(set.LowerBound(0, 1)).id, 3);
  // A key leaves a shared group (the group stays).
  set.Replace(c2, 0x0800, 3, 512, 0x0800, 3);
  EXPECT_EQ(Contents(set),
            (std::vector<Tuple>{{0, 512, 0x0800, 3}, {0, 2048, 0x2000, 2}, {0, 3072, 0x1000, 1}}));
  set.Erase(a2, 0x1000, 1);
  EXPECT_EQ(set.size(), 2u);
  EXPECT_FALSE(set.Contains(FreeKey(0, 3072, 0x1000, 1)));
}

// Random inserts, erases (by key and by slot) and replacements (split remainders, and
// Replace to any size: moving a lone group down or up, joining another group, or leaving a
// shared one) over `distinct_sizes` sizes must leave the same sequence as std::set, forwards
// and backwards.
void ExpectMatchesStdSetUnderRandomOperations(std::uint64_t seed, int distinct_sizes) {
  std::mt19937_64 rng(seed);
  const auto pick_size = [&] {
    return 512 * static_cast<std::int64_t>(1 + rng() % static_cast<std::uint64_t>(distinct_sizes));
  };
  FreeBlockSet set;
  std::set<Tuple> model;
  std::vector<BlockId> free_ids;
  std::map<BlockId, FreeBlockSet::Slot> slot_of;
  BlockId next_id = 0;
  std::uint64_t next_ptr = 0x1000;
  for (int step = 0; step < 20000; ++step) {
    const auto roll = rng() % 10;
    if (model.empty() || roll < 5) {
      BlockId id = next_id;
      if (!free_ids.empty()) {
        id = free_ids.back();
        free_ids.pop_back();
      } else {
        ++next_id;
      }
      const StreamId stream = rng() % 3 == 0 ? 0x7f10 : 0;
      const std::int64_t size = pick_size();
      slot_of[id] = set.Insert(FreeKey(stream, size, next_ptr, id));
      model.emplace(stream, size, next_ptr, id);
      next_ptr += 0x1000;
    } else {
      auto it = model.begin();
      std::advance(it, static_cast<long>(rng() % model.size()));
      const auto [stream, size, ptr, id] = *it;
      if (roll < 6 || size == 512) {
        if (roll % 2 == 0) {
          set.Erase(FreeKey(stream, size, ptr, id));
        } else {
          set.Erase(slot_of[id], ptr, id);  // by the slot Insert returned
        }
        free_ids.push_back(id);
      } else if (roll < 8) {  // merge-like: any new size and address, same stream and id
        const std::int64_t new_size = pick_size();
        slot_of[id] = set.Replace(slot_of[id], ptr, id, new_size, next_ptr, id);
        model.emplace(stream, new_size, next_ptr, id);
        next_ptr += 0x1000;
      } else {  // split: the remainder keeps the id, a smaller size and a higher address
        FreeBlockSet::Pos p = set.LowerBound(stream, size);
        while (set.At(p).id != id) p = set.Next(p);
        slot_of[id] = set.ReplaceAt(p, FreeKey(stream, size - 512, ptr + 512, id));
        model.emplace(stream, size - 512, ptr + 512, id);
      }
      model.erase(it);
    }
    ASSERT_EQ(set.size(), model.size()) << "step " << step;
  }
  const std::vector<Tuple> expected(model.begin(), model.end());
  ASSERT_EQ(Contents(set), expected);
  std::vector<Tuple> backwards;
  for (FreeBlockSet::Pos p = set.LowerBound(~StreamId{0}, 0); !set.IsBegin(p);) {
    p = set.Prev(p);
    const FreeKey& k = set.At(p);
    backwards.emplace_back(k.stream(), k.size(), k.ptr, k.id);
    EXPECT_TRUE(set.Contains(k));
  }
  EXPECT_EQ(std::vector<Tuple>(backwards.rbegin(), backwards.rend()), expected);
}

// Few distinct sizes: long runs of equal size, as in a fragmented pool.
TEST(FreeBlockSetTest, MatchesStdSetUnderRandomOperations) {
  ExpectMatchesStdSetUnderRandomOperations(7, 6);
}

// Many distinct sizes: a replaced key's new size is often more groups away than Replace's
// short linear walk (kWalkSteps) covers, so the halving search behind it is used too.
TEST(FreeBlockSetTest, MatchesStdSetUnderRandomOperationsWithManySizes) {
  ExpectMatchesStdSetUnderRandomOperations(11, 40);
}

// Many streams (97, so the halving stream lookup takes several steps), then a batch erase
// of a random subset that empties whole streams: the set must match std::set afterwards and
// its lookups, inserts and walks must work on the compacted stream list.
TEST(FreeBlockSetTest, BatchEraseOverManyStreamsMatchesStdSet) {
  std::mt19937_64 rng(23);
  FreeBlockSet set;
  std::set<Tuple> model;
  std::map<BlockId, FreeBlockSet::Slot> slot_of;
  std::uint64_t next_ptr = 0x10000;
  BlockId next_id = 0;
  auto insert = [&](StreamId stream) {
    const std::int64_t size = 512 * static_cast<std::int64_t>(1 + rng() % 5);
    slot_of[next_id] = set.Insert(stream, size, next_ptr, next_id);
    model.emplace(stream, size, next_ptr, next_id);
    next_ptr += 0x1000;
    ++next_id;
  };
  for (int i = 0; i < 2000; ++i) insert(static_cast<StreamId>(rng() % 97) * 0x100 + 1);
  for (int round = 0; round < 3; ++round) {
    set.BeginBatchErase();
    for (auto it = model.begin(); it != model.end();) {
      const auto [stream, size, ptr, id] = *it;
      // Every key of a third of the streams, and a random half of the rest.
      if ((stream / 0x100) % 3 == static_cast<StreamId>(round) || rng() % 2 == 0) {
        set.Erase(slot_of[id], ptr, id);
        it = model.erase(it);
      } else {
        ++it;
      }
    }
    set.EndBatchErase();
    ASSERT_EQ(set.size(), model.size());
    ASSERT_EQ(Contents(set), std::vector<Tuple>(model.begin(), model.end()));
    for (StreamId s = 0; s < 97 * 0x100 + 2; s += 0x80) {
      const auto ref = model.lower_bound(Tuple(s, 1024, 0, kNoBlock));
      const FreeBlockSet::Pos p = set.LowerBound(s, 1024);
      if (ref == model.end()) {
        EXPECT_TRUE(set.IsEnd(p)) << s;
      } else {
        ASSERT_FALSE(set.IsEnd(p)) << s;
        const FreeKey k = set.At(p);
        EXPECT_EQ(Tuple(k.stream(), k.size(), k.ptr, k.id), *ref) << s;
      }
    }
    for (int i = 0; i < 500; ++i) insert(static_cast<StreamId>(rng() % 97) * 0x100 + 1);
    ASSERT_EQ(Contents(set), std::vector<Tuple>(model.begin(), model.end()));
  }
}

}  // namespace
}  // namespace memtune::alloc
