// Property tests: seeded random traces of many thousands of events, under several configs
// and tight capacities (so retries, releases and OOMs happen). After every event the
// invariants of allocator.md 5.3 must hold.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "sim_test_util.h"

namespace memtune::alloc {
namespace {

struct Case {
  const char* conf;
  std::int64_t capacity_bytes;
  bool fraction;
};

// Sizes spanning the small pool, the 1-10 MiB band, large and oversize requests.
std::int64_t RandomSize(std::mt19937_64& rng) {
  switch (rng() % 6) {
    case 0:
      return 1 + static_cast<std::int64_t>(rng() % 4096);
    case 1:
      return 1 + static_cast<std::int64_t>(rng() % kMiB);
    case 2:
      return kMiB + static_cast<std::int64_t>(rng() % (9 * kMiB));
    case 3:
      return 10 * kMiB + static_cast<std::int64_t>(rng() % (40 * kMiB));
    case 4:
      return static_cast<std::int64_t>(rng() % 4) * kMiB;  // exact MiB multiples, incl. 0
    default:
      return 50 * kMiB + static_cast<std::int64_t>(rng() % (200 * kMiB));
  }
}

Status CheckGlobal(const Simulator& s) {
  MEMTUNE_RETURN_IF_ERROR(s.CheckInvariants());
  const std::int64_t reserved = All(s.stats().reserved_bytes).current;
  const std::int64_t allocated = All(s.stats().allocated_bytes).current;
  if (allocated > reserved) return Error{ErrorCode::kInternal, "", "allocated > reserved", {}};
  if (reserved + s.options().non_pytorch_bytes > s.options().capacity_bytes) {
    return Error{ErrorCode::kInternal, "", "reserved exceeds capacity", {}};
  }
  std::uint64_t end = 0;
  for (const SegmentInfo& seg : s.Segments()) {
    if (seg.address < end) return Error{ErrorCode::kInternal, "", "segments overlap", {}};
    end = seg.address + static_cast<std::uint64_t>(seg.total_size_bytes);
  }
  return OkStatus();
}

void RunRandomTrace(const Case& c, std::uint64_t seed, int events) {
  SimulatorOptions o;
  auto cfg = ParseAllocatorConfig(c.conf, kDefaultTorchVersion);
  ASSERT_TRUE(cfg.has_value());
  o.config = *cfg;
  o.capacity_bytes = c.capacity_bytes;
  o.non_pytorch_bytes = 3 * kMiB;
  if (c.fraction) o.memory_fraction = 0.9;
  o.pending_frees =
      seed % 2 ? PendingFreeCompletion::kAtNextMalloc : PendingFreeCompletion::kExplicit;
  Simulator s(o);
  std::mt19937_64 rng(seed);
  std::vector<HandleId> live;
  std::vector<HandleId> pending;
  HandleId next = 0;
  std::int64_t ooms = 0;
  for (int i = 0; i < events; ++i) {
    const unsigned roll = static_cast<unsigned>(rng() % 100);
    if (roll < 52 || live.empty()) {
      const StreamId stream = rng() % 10 == 0 ? 1 + rng() % 2 : 0;
      const AllocResult r = s.Alloc(next, RandomSize(rng), stream);
      ASSERT_NE(r.status, AllocStatus::kHandleInUse);
      if (r.status == AllocStatus::kOk) live.push_back(next);
      ooms += r.status == AllocStatus::kOutOfMemory;
      ++next;
    } else if (roll < 95) {
      const std::size_t k = rng() % live.size();
      const HandleId h = live[k];
      live[k] = live.back();
      live.pop_back();
      if (rng() % 8 == 0) s.RecordStream(h, 5);
      if (s.Free(h) == FreeStatus::kPending) pending.push_back(h);
    } else if (roll < 98 && !pending.empty()) {
      s.FreeCompleted(pending.back());
      pending.pop_back();
    } else {
      s.EmptyCache();
      pending.clear();
    }
    const Status st = CheckGlobal(s);
    ASSERT_TRUE(st.has_value()) << "seed " << seed << " event " << i << ": "
                                << st.error().Describe();
  }
  EXPECT_EQ(ooms, s.stats().num_ooms);
}

class PropertyTest : public ::testing::TestWithParam<Case> {};

TEST_P(PropertyTest, InvariantsHoldAfterEveryEvent) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) RunRandomTrace(GetParam(), seed * 7919, 5000);
}

INSTANTIATE_TEST_SUITE_P(
    Configs, PropertyTest,
    ::testing::Values(
        Case{"", 600 * kMiB, false}, Case{"max_split_size_mb:64", 700 * kMiB, false},
        Case{"expandable_segments:True", 600 * kMiB, false},
        Case{"expandable_segments:True,max_split_size_mb:64", 800 * kMiB, false},
        Case{"garbage_collection_threshold:0.6", 700 * kMiB, true},
        Case{"roundup_power2_divisions:[1:2,16:4,>:8],max_split_size_mb:100", 900 * kMiB, false},
        Case{"expandable_segments:True,garbage_collection_threshold:0.5", 700 * kMiB, true}));

TEST(PropertyTest, TightCapacityProducesOomsAndRetries) {
  // The capacities above are small enough that the random traces must hit the slow paths.
  SimulatorOptions o;
  o.capacity_bytes = 300 * kMiB;
  Simulator s(o);
  std::mt19937_64 rng(42);
  for (HandleId h = 0; h < 2000; ++h) {
    s.Alloc(h, RandomSize(rng));
    if (h % 3 == 0) s.Free(h - h % 5);
  }
  EXPECT_GT(s.stats().num_ooms, 0);
  EXPECT_GT(s.stats().num_alloc_retries, 0);
  EXPECT_TRUE(CheckGlobal(s).has_value());
}

}  // namespace
}  // namespace memtune::alloc
