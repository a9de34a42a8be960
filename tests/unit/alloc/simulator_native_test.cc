// The native (cudaMalloc) allocation path: segments, best fit, splitting, merging, oversize
// blocks, statistics. Expectations are derived by hand from allocator.md sections 1-5.
#include <gtest/gtest.h>

#include "sim_test_util.h"

namespace memtune::alloc {
namespace {

using testing::Allocated;
using testing::MakeSim;
using testing::MustAlloc;
using testing::MustFree;
using testing::Reserved;
using testing::Segments;

constexpr int kSmall = 1, kLarge = 2;  // StatArray indexes

TEST(NativeTest, WorkedSizesOfSection16) {
  struct Row {
    std::int64_t request, segment, counted;
  };
  const Row rows[] = {
      {1, 2 * kMiB, 512},
      {kMiB, 2 * kMiB, kMiB},
      {1048577, 20 * kMiB, 1049088},
      {9 * kMiB, 20 * kMiB, 9 * kMiB},
      {10 * kMiB, 10 * kMiB, 10 * kMiB},
      {10 * kMiB + 1, 12 * kMiB, 10 * kMiB + 512},
      {11 * kMiB + 1, 12 * kMiB, 12 * kMiB},  // not split: the whole block is counted
      {30 * kMiB + 1, 32 * kMiB, 30 * kMiB + 512},
  };
  for (const Row& r : rows) {
    Simulator s = MakeSim();
    const AllocResult a = s.Alloc(0, r.request);
    ASSERT_EQ(a.status, AllocStatus::kOk);
    EXPECT_EQ(Reserved(s), r.segment) << r.request;
    EXPECT_EQ(Allocated(s), r.counted) << r.request;
    EXPECT_EQ(a.block_size_bytes, r.counted);
    EXPECT_EQ(All(s.stats().requested_bytes).current, r.request);
    EXPECT_TRUE(s.CheckInvariants().has_value());
  }
}

TEST(NativeTest, SmallPoolPacksTwoOneMiBBlocks) {
  Simulator s = MakeSim();
  const auto a = MustAlloc(s, 0, kMiB);
  const auto b = MustAlloc(s, 1, kMiB);
  EXPECT_EQ(b, a + static_cast<std::uint64_t>(kMiB));  // the low end of the free block
  EXPECT_EQ(Reserved(s), 2 * kMiB);
  EXPECT_EQ(s.stats().reserved_bytes[kSmall].current, 2 * kMiB);
  EXPECT_EQ(s.stats().reserved_bytes[kLarge].current, 0);
  EXPECT_EQ(s.stats().num_device_alloc, 1);
}

TEST(NativeTest, BestFitTakesSmallestThenLowestAddress) {
  Simulator s = MakeSim();
  // Three separate segments: 40, 30, 30 MiB; free all; a 25 MiB request takes the first 30.
  const auto a = MustAlloc(s, 0, 40 * kMiB);
  const auto b = MustAlloc(s, 1, 30 * kMiB);
  const auto c = MustAlloc(s, 2, 30 * kMiB);
  ASSERT_LT(b, c);
  MustFree(s, 0);
  MustFree(s, 2);
  MustFree(s, 1);
  EXPECT_EQ(MustAlloc(s, 3, 25 * kMiB), b);
  EXPECT_EQ(MustAlloc(s, 4, 35 * kMiB), a);
  EXPECT_EQ(Segments(s), 3);
}

TEST(NativeTest, StreamsHaveSeparateFreeLists) {
  Simulator s = MakeSim();
  MustAlloc(s, 0, 50 * kMiB, /*stream=*/0);
  MustFree(s, 0);
  MustAlloc(s, 1, 50 * kMiB, /*stream=*/7);  // the cached 50 MiB of stream 0 is invisible
  EXPECT_EQ(Reserved(s), 100 * kMiB);
  s.EmptyCache();
  EXPECT_EQ(Reserved(s), 50 * kMiB);
}

TEST(NativeTest, MergeAndInactiveSplitCounters) {
  Simulator s = MakeSim();
  MustAlloc(s, 0, 2 * kMiB);  // 20 MiB segment: [2 | 18 free]
  MustAlloc(s, 1, 3 * kMiB);  // [2 | 3 | 15 free]
  const DeviceStats& st = s.stats();
  EXPECT_EQ(All(st.inactive_split).current, 1);
  EXPECT_EQ(All(st.inactive_split_bytes).current, 15 * kMiB);
  MustFree(s, 0);  // [2 free | 3 | 15 free]
  EXPECT_EQ(All(st.inactive_split).current, 2);
  EXPECT_EQ(All(st.inactive_split_bytes).current, 17 * kMiB);
  MustFree(s, 1);  // merges into one unsplit 20 MiB block
  EXPECT_EQ(All(st.inactive_split).current, 0);
  EXPECT_EQ(All(st.inactive_split_bytes).current, 0);
  EXPECT_EQ(All(st.active_bytes).current, 0);
  ASSERT_EQ(s.Segments().size(), 1u);
  EXPECT_EQ(s.Segments()[0].blocks.size(), 1u);
  s.EmptyCache();
  EXPECT_EQ(Reserved(s), 0);
  EXPECT_EQ(st.num_device_free, 1);
  EXPECT_EQ(All(st.reserved_bytes).peak, 20 * kMiB);
}

TEST(NativeTest, PartlyUsedSegmentsSurviveEmptyCache) {
  Simulator s = MakeSim();
  MustAlloc(s, 0, 4 * kMiB);
  MustAlloc(s, 1, 4 * kMiB);
  MustFree(s, 0);
  s.EmptyCache();
  EXPECT_EQ(Reserved(s), 20 * kMiB);  // inactive split memory stays cached
  EXPECT_EQ(All(s.stats().inactive_split_bytes).current, 16 * kMiB);
  EXPECT_EQ(s.stats().num_sync_all_streams, 1);
}

TEST(NativeTest, OversizeBlocksAreNotSplitAndReusedNearlyExactly) {
  Simulator s = MakeSim("max_split_size_mb:128");
  MustAlloc(s, 0, 200 * kMiB);
  EXPECT_EQ(s.stats().oversize_segments.current, 1);
  EXPECT_EQ(s.stats().oversize_allocations.current, 1);
  MustFree(s, 0);
  // A normal request never takes an oversize block: a new segment.
  MustAlloc(s, 1, 100 * kMiB);
  EXPECT_EQ(Reserved(s), 300 * kMiB);
  // An oversize request takes a block less than 20 MiB bigger, unsplit.
  const AllocResult r = s.Alloc(2, 190 * kMiB);
  ASSERT_EQ(r.status, AllocStatus::kOk);
  EXPECT_EQ(r.block_size_bytes, 200 * kMiB);
  EXPECT_EQ(Reserved(s), 300 * kMiB);
  MustFree(s, 2);
  // 180 MiB: the 200 MiB block is exactly 20 MiB bigger, so refused: new 180 MiB segment.
  MustAlloc(s, 3, 180 * kMiB);
  EXPECT_EQ(Reserved(s), 480 * kMiB);
}

TEST(NativeTest, OomRetryReleasesCacheAndCountsRetry) {
  Simulator s = MakeSim("", /*capacity=*/100 * kMiB);
  MustAlloc(s, 0, 60 * kMiB);
  MustFree(s, 0);
  MustAlloc(s, 1, 30 * kMiB, /*stream=*/1);  // other stream: new segment, total 90
  // 62 MiB: cache miss (60 < 62), cudaMalloc fails (90 + 62 > 100), the retry after
  // empty_cache frees the 60 MiB segment and succeeds.
  MustAlloc(s, 2, 62 * kMiB);
  EXPECT_EQ(s.stats().num_alloc_retries, 1);
  EXPECT_EQ(s.stats().num_ooms, 0);
  EXPECT_EQ(Reserved(s), 92 * kMiB);
  EXPECT_EQ(All(s.stats().reserved_bytes).peak, 92 * kMiB);
}

TEST(NativeTest, ReleaseAvailableCachedBlocksFreesOneOversizeBlock) {
  Simulator s = MakeSim("max_split_size_mb:40", /*capacity=*/250 * kMiB);
  MustAlloc(s, 0, 100 * kMiB);
  MustAlloc(s, 1, 120 * kMiB);
  MustFree(s, 0);
  MustFree(s, 1);
  // 60 MiB (oversize): the 100 MiB block is >= 60 + 20, refused; cudaMalloc fails (220 + 60 >
  // 250); release_available_cached_blocks frees the smallest block >= 60 MiB (100 MiB).
  MustAlloc(s, 2, 60 * kMiB);
  EXPECT_EQ(s.stats().num_alloc_retries, 0);
  EXPECT_EQ(Reserved(s), 180 * kMiB);
  EXPECT_EQ(s.stats().num_device_free, 1);
}

TEST(NativeTest, GarbageCollectionNeedsAFraction) {
  // Without a memory fraction the threshold is inert.
  Simulator plain = MakeSim("garbage_collection_threshold:0.5", 100 * kMiB);
  MustAlloc(plain, 0, 60 * kMiB);
  MustFree(plain, 0);
  MustAlloc(plain, 1, 30 * kMiB, 1);
  EXPECT_EQ(Reserved(plain), 90 * kMiB);
  // With a fraction, a cache miss above the threshold frees old unsplit blocks first.
  Simulator gc = MakeSim("garbage_collection_threshold:0.5", 100 * kMiB);
  gc.SetMemoryFraction(1.0);  // 2.9: any call sets the limit (100 MiB)
  MustAlloc(gc, 0, 60 * kMiB);
  MustFree(gc, 0);
  MustAlloc(gc, 1, 30 * kMiB, 1);  // 60 > 50 MiB threshold: GC frees the 60 MiB block
  EXPECT_EQ(Reserved(gc), 30 * kMiB);
}

TEST(NativeTest, FractionLimitsWithoutCudaMalloc) {
  Simulator s = MakeSim("", 100 * kMiB);
  s.SetMemoryFraction(0.5);
  MustAlloc(s, 0, 40 * kMiB);
  EXPECT_EQ(s.Alloc(1, 20 * kMiB).status, AllocStatus::kOutOfMemory);  // 40 + 20 > 50
  ASSERT_TRUE(s.last_oom().has_value());
  EXPECT_EQ(*s.last_oom()->allowed_bytes, 50 * kMiB);
  EXPECT_EQ(s.stats().num_ooms, 1);
}

TEST(NativeTest, RecordStreamDefersFree) {
  SimulatorOptions o;
  o.pending_frees = PendingFreeCompletion::kExplicit;
  Simulator s(o);
  MustAlloc(s, 0, 30 * kMiB);
  EXPECT_EQ(s.RecordStream(0, 0), FreeStatus::kSameStream);
  EXPECT_EQ(s.RecordStream(0, 5), FreeStatus::kRecorded);
  EXPECT_EQ(s.Free(0), FreeStatus::kPending);
  EXPECT_EQ(Allocated(s), 0);
  EXPECT_EQ(All(s.stats().active_bytes).current, 30 * kMiB);
  MustAlloc(s, 1, 30 * kMiB);  // the pending block is not reusable: new segment
  EXPECT_EQ(Reserved(s), 60 * kMiB);
  EXPECT_EQ(s.FreeCompleted(0), FreeStatus::kFreed);
  EXPECT_EQ(All(s.stats().active_bytes).current, 30 * kMiB);
  EXPECT_EQ(s.FreeCompleted(0), FreeStatus::kNotPending);
  EXPECT_TRUE(s.CheckInvariants().has_value());
}

TEST(NativeTest, PendingFreesCompleteAtNextMallocByDefault) {
  Simulator s = MakeSim();
  MustAlloc(s, 0, 30 * kMiB);
  s.RecordStream(0, 5);
  EXPECT_EQ(s.Free(0), FreeStatus::kPending);
  MustAlloc(s, 1, 30 * kMiB);  // process_events completes the free first: reuse
  EXPECT_EQ(Reserved(s), 30 * kMiB);
}

TEST(NativeTest, HandleErrorsAndNullAllocations) {
  Simulator s = MakeSim();
  EXPECT_EQ(s.Free(3), FreeStatus::kNotAllocated);
  MustAlloc(s, 0, 100);
  EXPECT_EQ(s.Alloc(0, 100).status, AllocStatus::kHandleInUse);
  MustFree(s, 0);
  EXPECT_EQ(s.Free(0), FreeStatus::kNotAllocated);
  const AllocResult z = s.Alloc(1, 0);
  EXPECT_EQ(z.status, AllocStatus::kOk);
  EXPECT_EQ(z.address, 0u);
  EXPECT_EQ(s.stats().allocation[0].allocated, 1);  // only the 100-byte block was counted
  EXPECT_EQ(s.Free(1), FreeStatus::kFreed);
}

TEST(NativeTest, ExabyteRequestFailsBeforeTheAllocator) {
  Simulator s = MakeSim();
  EXPECT_EQ(s.Alloc(0, kOneExaByte).status, AllocStatus::kOutOfMemory);
  EXPECT_EQ(s.LastOomMessage(), "CUDA out of memory. Tried to allocate more than 1EB memory.");
  EXPECT_EQ(s.stats().num_ooms, 0);
}

TEST(NativeTest, ObserverSeesTraceOrder) {
  Simulator s = MakeSim();
  std::vector<AllocatorEventKind> kinds;
  s.SetObserver([&](const AllocatorEvent& e) { kinds.push_back(e.kind); });
  MustAlloc(s, 0, 30 * kMiB);
  MustFree(s, 0);
  s.EmptyCache();
  const std::vector<AllocatorEventKind> want = {
      AllocatorEventKind::kSegmentAlloc, AllocatorEventKind::kAlloc,
      AllocatorEventKind::kFreeRequested, AllocatorEventKind::kFreeCompleted,
      AllocatorEventKind::kSegmentFree};
  EXPECT_EQ(kinds, want);
}

TEST(NativeTest, AddressModelIsDeterministicAndOracleOverrides) {
  Simulator s = MakeSim();
  const auto a = MustAlloc(s, 0, 30 * kMiB);
  EXPECT_EQ(a, 0x7f0000000000ULL);
  const auto b = MustAlloc(s, 1, 10 * kMiB);
  EXPECT_EQ(b, a + static_cast<std::uint64_t>(30 * kMiB));
  MustFree(s, 0);
  s.EmptyCache();
  EXPECT_EQ(MustAlloc(s, 2, 4 * kMiB), a);  // the lowest hole is reused
  Simulator o = MakeSim();
  o.SetAddressOracle([](const SegmentRequest& r) -> std::optional<std::uint64_t> {
    return r.expandable ? std::nullopt : std::optional<std::uint64_t>(0x1000000000ULL);
  });
  EXPECT_EQ(MustAlloc(o, 0, 30 * kMiB), 0x1000000000ULL);
}

}  // namespace
}  // namespace memtune::alloc
