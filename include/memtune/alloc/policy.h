// Allocator policy as plain functions: size rounding, pool choice, segment size, best fit,
// the split rule, oversize rules, expandable page arithmetic and GC victim choice. The
// simulator composes them; each is unit-tested alone (tests/unit/alloc/policy_test.cc).
//
// Every function cites the PyTorch function it restates (c10/cuda/CUDACachingAllocator.cpp).
// Sizes are bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "memtune/alloc/block.h"
#include "memtune/alloc/config.h"

namespace memtune::alloc {

// Index into roundup_power2_divisions for a size: clamp(floor(log2(n)) - 20, 0, 15).
// PyTorch CUDAAllocatorConfig::roundup_power2_divisions(size).
int RoundupIntervalIndex(std::int64_t bytes);

// The next 1/d step above a power of two: for d = 4, 5000 -> 5120. Powers of two stay.
// `divisions` must be a power of two >= 2. PyTorch roundup_power2_next_division().
std::int64_t RoundupPower2NextDivision(std::int64_t bytes, std::int64_t divisions);

// round_size(orig): the block size a request needs (>= 512, a multiple of 512 except in
// 2.1-2.3 with a division entry of 1, see allocator.md 1.2). PyTorch round_size().
// Example: RoundSize(1, cfg) == 512; RoundSize(10 MiB + 1, cfg) == 10 MiB + 512.
std::int64_t RoundSize(std::int64_t orig_bytes, const AllocatorConfig& config);

// The same with the division table and the version's guard given directly (hot path).
std::int64_t RoundSize(std::int64_t orig_bytes,
                       const std::array<std::int64_t, kRoundupIntervals>& divisions,
                       bool needs_two_divisions);

// Small pool for rounded sizes <= 1 MiB, else large. PyTorch get_pool().
inline PoolKind PoolFor(std::int64_t rounded_bytes) {
  return rounded_bytes <= kSmallSize ? PoolKind::kSmall : PoolKind::kLarge;
}

// The cudaMalloc size for a rounded request: 2 MiB, 20 MiB (main: large_segment_size) or
// the request rounded up to 2 MiB. PyTorch get_allocation_size().
std::int64_t AllocationSize(std::int64_t rounded_bytes, const AllocatorConfig& config);

// Whether the rest of a chosen block is split off. Expandable mode and the small pool split
// any rest >= 512 B; native large blocks need size < max_split_size and a rest > 1 MiB.
// PyTorch should_split(). See note [split threshold] in docs/design/allocator.md.
bool ShouldSplit(std::int64_t block_bytes, std::int64_t rounded_bytes, PoolKind pool,
                 bool expandable_active, std::int64_t max_split_size_bytes);

// get_free_block's oversize rules: a request below max_split_size never gets an oversize
// block; an oversize request takes a block only if it is less than
// max_non_split_rounding bigger. PyTorch get_free_block().
bool OversizeRulesAllow(std::int64_t rounded_bytes, std::int64_t candidate_bytes,
                        std::int64_t max_split_size_bytes,
                        std::int64_t max_non_split_rounding_bytes);

struct BestFitRules {
  bool expandable_active = false;
  std::int64_t max_split_size_bytes = kUnlimitedBytes;
  std::int64_t max_non_split_rounding_bytes = kLargeBuffer;
};

// The position in `pool` of the block get_free_block() would take for (stream, rounded
// size), or nullopt. Smallest block of the stream with size >= request, lowest address among
// equals; expandable blocks are judged by their "expandable size" (size plus a following
// unmapped range); no second candidate is tried when the oversize rules refuse the best fit.
// PyTorch get_free_block().
std::optional<FreeBlockSet::Pos> FindBestFit(const FreeBlockSet& pool, const BlockArena& blocks,
                                             StreamId stream, std::int64_t rounded_bytes,
                                             const BestFitRules& rules);

// Expandable page size of a pool: 2 MiB small, 20 MiB (main: large_segment_size) large.
std::int64_t ExpandablePageBytes(PoolKind pool, const AllocatorConfig& config);

// Virtual address space one expandable segment reserves: ceil((total + total/8) / page)
// pages. PyTorch ExpandableSegment constructor.
std::int64_t ExpandableReservationBytes(std::int64_t device_total_bytes, std::int64_t page_bytes);

// A range of pages [first, last) of an expandable segment.
struct PageRange {
  std::int64_t first = 0;
  std::int64_t last = 0;
  std::int64_t count() const { return last > first ? last - first : 0; }
};

// Pages map(offset, n) creates: [floor(offset/P), ceil((offset+n)/P)). ExpandableSegment::map.
PageRange PagesToMap(std::int64_t offset_bytes, std::int64_t bytes, std::int64_t page_bytes);

// Pages unmap(offset, n) releases: only whole pages inside the range,
// [ceil(offset/P), floor((offset+n)/P)). ExpandableSegment::unmap.
PageRange PagesToUnmap(std::int64_t offset_bytes, std::int64_t bytes, std::int64_t page_bytes);

// One unsplit free large-pool block considered by garbage collection, in pool order.
struct GcCandidate {
  std::int64_t size_bytes = 0;
  std::int64_t age = 0;  // get_free_block calls on the pool since the block was freed
};

// Indexes of `candidates` that garbage_collect_cached_blocks() releases, in release order:
// passes over the remaining blocks free every block whose age >= the average age at the
// start of the pass, until `target_bytes` are reclaimed or a pass frees nothing.
// PyTorch garbage_collect_cached_blocks().
std::vector<std::size_t> SelectGcVictims(const std::vector<GcCandidate>& candidates,
                                         std::int64_t target_bytes);

}  // namespace memtune::alloc
