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
inline int RoundupIntervalIndex(std::int64_t bytes) {
  const int index = 63 - __builtin_clzll(static_cast<unsigned long long>(bytes)) - kRoundupFirstLog2;
  return index < 0 ? 0 : (index > kRoundupIntervals - 1 ? kRoundupIntervals - 1 : index);
}

// The next 1/d step above a power of two: for d = 4, 5000 -> 5120. Powers of two stay.
// `divisions` must be a power of two >= 2. PyTorch roundup_power2_next_division().
inline std::int64_t RoundupPower2NextDivision(std::int64_t bytes, std::int64_t divisions) {
  if (bytes > 0 && (bytes & (bytes - 1)) == 0) return bytes;
  const int log2_bytes = 63 - __builtin_clzll(static_cast<unsigned long long>(bytes));
  const int log2_divisions = 63 - __builtin_clzll(static_cast<unsigned long long>(divisions));
  const std::int64_t floor_pow2 = std::int64_t{1} << log2_bytes;
  const std::int64_t step = floor_pow2 >> log2_divisions;
  if (step == 0) return floor_pow2 << 1;
  const std::int64_t low = bytes & ~(step - 1);
  return low == bytes ? bytes : low + step;
}

// round_size(orig) with the division table and the version's guard given directly (the
// simulator's hot path); see the AllocatorConfig overload below.
inline std::int64_t RoundSize(std::int64_t orig_bytes,
                              const std::array<std::int64_t, kRoundupIntervals>& divisions,
                              bool needs_two_divisions) {
  // PyTorch round_size(); the division guard changed in 2.4 (allocator.md 1.2).
  if (orig_bytes < kMinBlockSize) return kMinBlockSize;
  const std::int64_t d = divisions[static_cast<std::size_t>(RoundupIntervalIndex(orig_bytes))];
  if ((needs_two_divisions ? d > 1 : d > 0) && orig_bytes > kMinBlockSize * d) {
    // 2.1-2.3: the helper leaves the size unchanged for d <= 1 (not even 512 rounding).
    if (d <= 1) return orig_bytes;
    return RoundupPower2NextDivision(orig_bytes, d);
  }
  return (orig_bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

// round_size(orig): the block size a request needs (>= 512, a multiple of 512 except in
// 2.1-2.3 with a division entry of 1, see allocator.md 1.2). PyTorch round_size().
// Example: RoundSize(1, cfg) == 512; RoundSize(10 MiB + 1, cfg) == 10 MiB + 512.
inline std::int64_t RoundSize(std::int64_t orig_bytes, const AllocatorConfig& config) {
  return RoundSize(orig_bytes, config.roundup_power2_divisions,
                   config.rules().roundup_needs_two_divisions);
}

// Small pool for rounded sizes <= 1 MiB, else large. PyTorch get_pool().
inline PoolKind PoolFor(std::int64_t rounded_bytes) {
  return rounded_bytes <= kSmallSize ? PoolKind::kSmall : PoolKind::kLarge;
}

// The cudaMalloc size for a rounded request: 2 MiB, 20 MiB (main: large_segment_size) or
// the request rounded up to 2 MiB. PyTorch get_allocation_size().
inline std::int64_t AllocationSize(std::int64_t rounded_bytes, const AllocatorConfig& config) {
  // large_segment_size replaces kLargeBuffer in main.
  if (rounded_bytes <= kSmallSize) return kSmallBuffer;
  if (rounded_bytes < kMinLargeAlloc) return config.large_segment_size_bytes;
  return (rounded_bytes + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

// Whether the rest of a chosen block is split off. Expandable mode and the small pool split
// any rest >= 512 B; native large blocks need size < max_split_size and a rest > 1 MiB.
// PyTorch should_split(). See note [split threshold] in docs/design/allocator.md.
inline bool ShouldSplit(std::int64_t block_bytes, std::int64_t rounded_bytes, PoolKind pool,
                        bool expandable_active, std::int64_t max_split_size_bytes) {
  const std::int64_t remaining = block_bytes - rounded_bytes;
  if (pool == PoolKind::kSmall || expandable_active) return remaining >= kMinBlockSize;
  return rounded_bytes < max_split_size_bytes && remaining > kSmallSize;
}

// get_free_block's oversize rules: a request below max_split_size never gets an oversize
// block; an oversize request takes a block only if it is less than
// max_non_split_rounding bigger. PyTorch get_free_block().
inline bool OversizeRulesAllow(std::int64_t rounded_bytes, std::int64_t candidate_bytes,
                               std::int64_t max_split_size_bytes,
                               std::int64_t max_non_split_rounding_bytes) {
  // "Do not return an oversized block for a large request" and "Allow oversized block size
  // to be rounded up but within a limit".
  if (rounded_bytes < max_split_size_bytes) return candidate_bytes < max_split_size_bytes;
  return candidate_bytes < rounded_bytes + max_non_split_rounding_bytes;
}

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
// FindBestFit's continuation when the smallest fit `first` is an expandable block (the
// walk by expandable size, or past expandable blocks when expandable segments are off).
std::optional<FreeBlockSet::Pos> FindBestFitExpandable(const FreeBlockSet& pool,
                                                       const BlockArena& blocks, StreamId stream,
                                                       std::int64_t rounded_bytes,
                                                       const BestFitRules& rules,
                                                       FreeBlockSet::Pos first);

[[gnu::always_inline]] inline std::optional<FreeBlockSet::Pos> FindBestFit(
    const FreeBlockSet& pool, const BlockArena& blocks, StreamId stream,
    std::int64_t rounded_bytes, const BestFitRules& rules) {
  const FreeBlockSet::Pos it = pool.LowerBound(stream, rounded_bytes);
  if (pool.IsEnd(it) || pool.StreamAt(it) != stream) return std::nullopt;
  if (blocks[pool.IdAt(it)].is_expandable()) {
    return FindBestFitExpandable(pool, blocks, stream, rounded_bytes, rules, it);
  }
  if (!OversizeRulesAllow(rounded_bytes, pool.SizeAt(it), rules.max_split_size_bytes,
                          rules.max_non_split_rounding_bytes)) {
    return std::nullopt;
  }
  return it;
}

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
