// Expandable segments: growth at the tail, mapping holes, unmapping only whole free pages,
// statistics differences, and both worked examples of allocator.md section 4.9.
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

constexpr const char* kExpandable = "expandable_segments:True";

TEST(Section49Test, Example1ExpandableWins) {
  // a = 100 MiB; free(a); b = 60 MiB; c = 100 MiB.
  Simulator native = MakeSim();
  MustAlloc(native, 0, 100 * kMiB);
  MustFree(native, 0);
  MustAlloc(native, 1, 60 * kMiB);
  MustAlloc(native, 2, 100 * kMiB);
  EXPECT_EQ(Reserved(native), 200 * kMiB);

  Simulator exp = MakeSim(kExpandable);
  std::vector<AllocatorEvent> maps;
  exp.SetObserver([&](const AllocatorEvent& e) {
    if (e.kind == AllocatorEventKind::kSegmentMap) maps.push_back(e);
  });
  const auto a = MustAlloc(exp, 0, 100 * kMiB);
  MustFree(exp, 0);
  MustAlloc(exp, 1, 60 * kMiB);
  const auto c = MustAlloc(exp, 2, 100 * kMiB);
  EXPECT_EQ(Reserved(exp), 160 * kMiB);
  ASSERT_EQ(maps.size(), 2u);
  EXPECT_EQ(maps[0].size_bytes, 100 * kMiB);
  EXPECT_EQ(maps[1].size_bytes, 60 * kMiB);
  EXPECT_EQ(maps[1].address, a + static_cast<std::uint64_t>(100 * kMiB));
  EXPECT_EQ(c, a + static_cast<std::uint64_t>(60 * kMiB));  // grows from the free 40 MiB
  EXPECT_EQ(Segments(exp), 0);  // segment count ignores expandable mappings
  EXPECT_EQ(exp.stats().num_device_alloc, 2);
}

TEST(ExpandableTest, HugeCapacityStillReservesAddressSpaceOnManyStreams) {
  // Each (stream, pool) segment reserves 1.125 x capacity of virtual addresses. At 1 PiB
  // (the largest capacity a job may give, and what "no GPU given" replays use) the address
  // model must hold many of them: this failed with an OOM at the first allocation while the
  // model's range was 64 TiB.
  Simulator exp = MakeSim(kExpandable, std::int64_t{1} << 50);
  for (StreamId stream = 0; stream < 8; ++stream) {
    MustAlloc(exp, static_cast<HandleId>(2 * stream), 100 * kMiB, stream);  // large pool
    MustAlloc(exp, static_cast<HandleId>(2 * stream + 1), 1000, stream);    // small pool
  }
  EXPECT_EQ(Reserved(exp), 8 * (100 * kMiB + 2 * kMiB));
}

TEST(ExpandableTest, HugeCapacityHoldsAThousandStreams) {
  // 1,000 streams x 1.125 PiB of reservations: a 2^60-byte address model ran out after 910
  // and reported an OOM for a 1000-byte request (simulate of a 1,000-stream trace).
  Simulator exp = MakeSim(kExpandable, std::int64_t{1} << 50);
  for (StreamId stream = 0; stream < 1000; ++stream) {
    MustAlloc(exp, static_cast<HandleId>(stream), 1000, stream);
  }
  EXPECT_EQ(Reserved(exp), 1000 * 2 * kMiB);
}

TEST(Section49Test, Example2NativeWins) {
  // x = 1000 B; A = 5 MiB; B = 30 MiB + 1; free(A); C = 18 MiB.
  Simulator native = MakeSim();
  MustAlloc(native, 0, 1000);
  MustAlloc(native, 1, 5 * kMiB);
  MustAlloc(native, 2, 30 * kMiB + 1);
  MustFree(native, 1);
  MustAlloc(native, 3, 18 * kMiB);
  EXPECT_EQ(Reserved(native), 54 * kMiB);

  Simulator exp = MakeSim(kExpandable);
  MustAlloc(exp, 0, 1000);
  const auto A = MustAlloc(exp, 1, 5 * kMiB);
  const auto B = MustAlloc(exp, 2, 30 * kMiB + 1);
  EXPECT_EQ(B, A + static_cast<std::uint64_t>(5 * kMiB));
  // The split leaves 5,242,368 B free at [35 MiB + 512, 40 MiB).
  bool found_rest = false;
  for (const SegmentInfo& seg : exp.Segments()) {
    for (const BlockInfo& b : seg.blocks) {
      if (b.address == A + static_cast<std::uint64_t>(35 * kMiB + 512)) {
        found_rest = b.size_bytes == 5242368 && b.state == BlockState::kFree;
      }
    }
  }
  EXPECT_TRUE(found_rest);
  MustFree(exp, 1);
  MustAlloc(exp, 3, 18 * kMiB);
  EXPECT_EQ(Reserved(exp), 62 * kMiB);
  exp.EmptyCache();
  EXPECT_EQ(Reserved(exp), 62 * kMiB);  // no page is wholly free
  EXPECT_EQ(exp.stats().num_device_free, 0);
}

TEST(ExpandableTest, EmptyCacheUnmapsOnlyWholeFreePages) {
  Simulator s = MakeSim(kExpandable);
  MustAlloc(s, 0, 50 * kMiB);  // maps 3 pages [0, 60)
  MustAlloc(s, 1, 5 * kMiB);   // [50, 55) from the free tail
  MustFree(s, 0);              // [0, 50) free: pages 0 and 1 are whole
  s.EmptyCache();
  EXPECT_EQ(Reserved(s), 20 * kMiB);
  EXPECT_EQ(s.stats().num_device_free, 1);  // one unmap call for [0, 40)
  EXPECT_EQ(Allocated(s), 5 * kMiB);
  // Growth now fills the unmapped hole at the lowest address first.
  std::vector<AllocatorEvent> maps;
  s.SetObserver([&](const AllocatorEvent& e) {
    if (e.kind == AllocatorEventKind::kSegmentMap) maps.push_back(e);
  });
  const auto c = MustAlloc(s, 2, 45 * kMiB);  // [0, 40) unmapped + [40, 50) free = 50 MiB room
  ASSERT_EQ(maps.size(), 1u);
  EXPECT_EQ(maps[0].size_bytes, 40 * kMiB);
  EXPECT_EQ(c, maps[0].address);
  EXPECT_EQ(Reserved(s), 60 * kMiB);
}

TEST(ExpandableTest, WholeSegmentIsDestroyedWhenFullyUnmapped) {
  Simulator s = MakeSim(kExpandable);
  const auto a = MustAlloc(s, 0, 30 * kMiB);
  MustFree(s, 0);
  s.EmptyCache();
  EXPECT_EQ(Reserved(s), 0);
  EXPECT_TRUE(s.Segments().empty());
  EXPECT_EQ(MustAlloc(s, 1, 30 * kMiB), a);  // the VA range is reserved again at the same place
}

TEST(ExpandableTest, SplitsDownTo512BytesAndSkipsInactiveSplit) {
  Simulator s = MakeSim(kExpandable);
  const AllocResult r = s.Alloc(0, 19 * kMiB + 512 * 1024);  // rest 512 KiB < 1 MiB: still split
  ASSERT_EQ(r.status, AllocStatus::kOk);
  EXPECT_EQ(r.block_size_bytes, 19 * kMiB + 512 * 1024);
  EXPECT_EQ(All(s.stats().inactive_split).current, 0);
  EXPECT_EQ(All(s.stats().inactive_split_bytes).current, 0);
}

TEST(ExpandableTest, BestFitPrefersBoundedBlockOverGrowableTail) {
  Simulator s = MakeSim(kExpandable);
  MustAlloc(s, 0, 10 * kMiB);  // [0, 10)
  MustAlloc(s, 1, 20 * kMiB);  // [10, 30)
  MustAlloc(s, 2, 5 * kMiB);   // [30, 35); free tail [35, 40) touches unmapped space
  MustFree(s, 1);              // bounded free block [10, 30)
  // A 4 MiB request: lower_bound hits the 5 MiB tail first, but its expandable size is huge,
  // so best fit walks on to the bounded 20 MiB block.
  const auto d = MustAlloc(s, 3, 4 * kMiB);
  const auto base = s.Segments()[0].address;
  EXPECT_EQ(d, base + static_cast<std::uint64_t>(10 * kMiB));
}

TEST(ExpandableTest, MaxSplitSizeFencesOffMergedBlocks) {
  // Issue #123548 mechanism: oversize rules apply to expandable blocks too.
  Simulator s = MakeSim("expandable_segments:True,max_split_size_mb:128");
  MustAlloc(s, 0, 91 * kMiB);
  MustAlloc(s, 1, 45 * kMiB + 512 * 1024);
  MustAlloc(s, 2, 2 * kMiB);
  MustFree(s, 0);
  MustFree(s, 1);  // merged free block of 136.5 MiB >= 128 MiB: oversize
  const std::int64_t before = Reserved(s);
  MustAlloc(s, 3, 91 * kMiB);  // normal request cannot take the oversize block: grows
  EXPECT_GT(Reserved(s), before);
}

TEST(ExpandableTest, SmallPoolUsesTwoMiBPages) {
  Simulator s = MakeSim(kExpandable);
  MustAlloc(s, 0, 1000);
  EXPECT_EQ(Reserved(s), 2 * kMiB);
  EXPECT_EQ(s.stats().reserved_bytes[1].current, 2 * kMiB);
  MustAlloc(s, 1, kMiB);
  MustAlloc(s, 2, kMiB);  // 1 MiB + 1024 + 1 MiB > 2 MiB: one more page
  EXPECT_EQ(Reserved(s), 4 * kMiB);
}

TEST(ExpandableTest, OomUnmapsFreePagesBeforeGivingUp) {
  Simulator s = MakeSim(kExpandable, /*capacity=*/90 * kMiB);
  MustAlloc(s, 0, 50 * kMiB);  // 3 pages [0, 60): [0, 50) + free [50, 60)
  MustAlloc(s, 1, 9 * kMiB);   // [50, 59), free [59, 60)
  MustFree(s, 0);              // free [0, 50)
  // 70 MiB: growth from [59, 60) needs 4 more pages (60 + 80 > 90). The retry unmaps the whole
  // pages [0, 40); the hole [0, 40) + free [40, 50) is still too small, and growth at the tail
  // needs 20 + 80 > 90: OOM.
  EXPECT_EQ(s.Alloc(2, 70 * kMiB).status, AllocStatus::kOutOfMemory);
  EXPECT_EQ(Reserved(s), 20 * kMiB);  // only the page holding the live 9 MiB block stays
  EXPECT_EQ(s.stats().num_ooms, 1);
  EXPECT_EQ(s.stats().num_alloc_retries, 1);
  EXPECT_TRUE(s.CheckInvariants().has_value());
  EXPECT_EQ(
      s.LastOomMessage(),
      "CUDA out of memory. Tried to allocate 70.00 MiB. GPU 0 has a total capacity of 90.00 MiB of "
      "which 70.00 MiB is free. Including non-PyTorch memory, this process has 20.00 MiB memory in "
      "use. Of the allocated memory 9.00 MiB is allocated by PyTorch, and 11.00 MiB is reserved by "
      "PyTorch but unallocated. If reserved but unallocated memory is large try setting "
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation "
      "for Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html"
      "#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)");
}

}  // namespace
}  // namespace memtune::alloc
