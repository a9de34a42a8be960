// Allocator policy functions (see include/memtune/alloc/policy.h for the contracts).
#include "memtune/alloc/policy.h"

#include <algorithm>

namespace memtune::alloc {
namespace {

bool IsPow2(std::int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

int Log2(std::int64_t v) { return 63 - __builtin_clzll(static_cast<unsigned long long>(v)); }

}  // namespace

int RoundupIntervalIndex(std::int64_t bytes) {
  // PyTorch CUDAAllocatorConfig::roundup_power2_divisions(size): intervals start at 1 MiB.
  const int index = Log2(bytes) - kRoundupFirstLog2;
  return std::clamp(index, 0, kRoundupIntervals - 1);
}

std::int64_t RoundupPower2NextDivision(std::int64_t bytes, std::int64_t divisions) {
  // PyTorch roundup_power2_next_division().
  if (IsPow2(bytes)) return bytes;
  const std::int64_t floor_pow2 = std::int64_t{1} << Log2(bytes);
  const std::int64_t step = floor_pow2 >> Log2(divisions);
  if (step == 0) return floor_pow2 << 1;
  const std::int64_t low = bytes & ~(step - 1);
  return low == bytes ? bytes : low + step;
}

std::int64_t RoundSize(std::int64_t orig_bytes, const AllocatorConfig& config) {
  return RoundSize(orig_bytes, config.roundup_power2_divisions,
                   config.rules().roundup_needs_two_divisions);
}

std::int64_t RoundSize(std::int64_t orig_bytes,
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

std::int64_t AllocationSize(std::int64_t rounded_bytes, const AllocatorConfig& config) {
  // PyTorch get_allocation_size(); large_segment_size replaces kLargeBuffer in main.
  if (rounded_bytes <= kSmallSize) return kSmallBuffer;
  if (rounded_bytes < kMinLargeAlloc) return config.large_segment_size_bytes;
  return (rounded_bytes + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

bool ShouldSplit(std::int64_t block_bytes, std::int64_t rounded_bytes, PoolKind pool,
                 bool expandable_active, std::int64_t max_split_size_bytes) {
  // PyTorch should_split(). See note [split threshold] in docs/design/allocator.md.
  const std::int64_t remaining = block_bytes - rounded_bytes;
  if (pool == PoolKind::kSmall || expandable_active) return remaining >= kMinBlockSize;
  return rounded_bytes < max_split_size_bytes && remaining > kSmallSize;
}

bool OversizeRulesAllow(std::int64_t rounded_bytes, std::int64_t candidate_bytes,
                        std::int64_t max_split_size_bytes,
                        std::int64_t max_non_split_rounding_bytes) {
  // PyTorch get_free_block(): "Do not return an oversized block for a large request" and
  // "Allow oversized block size to be rounded up but within a limit".
  if (rounded_bytes < max_split_size_bytes && candidate_bytes >= max_split_size_bytes) return false;
  if (rounded_bytes >= max_split_size_bytes &&
      candidate_bytes >= rounded_bytes + max_non_split_rounding_bytes) {
    return false;
  }
  return true;
}

std::optional<FreeBlockSet::Pos> FindBestFit(const FreeBlockSet& pool, const BlockArena& blocks,
                                             StreamId stream, std::int64_t rounded_bytes,
                                             const BestFitRules& rules) {
  using Pos = FreeBlockSet::Pos;
  Pos it = pool.LowerBound(stream, rounded_bytes);
  if (pool.IsEnd(it) || pool.StreamAt(it) != stream) return std::nullopt;
  auto block = [&](Pos p) -> const Block& { return blocks[pool.IdAt(p)]; };
  if (block(it).is_expandable()) {
    if (rules.expandable_active) {
      // A block touching unmapped space counts with the space it could grow into.
      auto expandable_size = [&](const Block& b) {
        const bool grows = b.next != kNoBlock && !blocks[b.next].mapped;
        return b.size + (grows ? blocks[b.next].size : 0);
      };
      for (Pos next = pool.Next(it);
           block(it).is_expandable() && !pool.IsEnd(next) && pool.StreamAt(next) == stream &&
           expandable_size(block(next)) < expandable_size(block(it));
           next = pool.Next(next)) {
        it = next;
      }
    } else {
      do {
        it = pool.Next(it);
      } while (!pool.IsEnd(it) && block(it).is_expandable() && pool.StreamAt(it) == stream);
      if (pool.IsEnd(it) || pool.StreamAt(it) != stream) return std::nullopt;
    }
  }
  if (!OversizeRulesAllow(rounded_bytes, pool.SizeAt(it), rules.max_split_size_bytes,
                          rules.max_non_split_rounding_bytes)) {
    return std::nullopt;
  }
  return it;
}

std::int64_t ExpandablePageBytes(PoolKind pool, const AllocatorConfig& config) {
  return pool == PoolKind::kSmall ? kSmallBuffer : config.large_segment_size_bytes;
}

std::int64_t ExpandableReservationBytes(std::int64_t device_total_bytes, std::int64_t page_bytes) {
  const std::int64_t wanted = device_total_bytes + device_total_bytes / 8;
  return (wanted + page_bytes - 1) / page_bytes * page_bytes;
}

PageRange PagesToMap(std::int64_t offset_bytes, std::int64_t bytes, std::int64_t page_bytes) {
  return PageRange{offset_bytes / page_bytes, (offset_bytes + bytes + page_bytes - 1) / page_bytes};
}

PageRange PagesToUnmap(std::int64_t offset_bytes, std::int64_t bytes, std::int64_t page_bytes) {
  return PageRange{(offset_bytes + page_bytes - 1) / page_bytes,
                   (offset_bytes + bytes) / page_bytes};
}

std::vector<std::size_t> SelectGcVictims(const std::vector<GcCandidate>& candidates,
                                         std::int64_t target_bytes) {
  std::vector<std::size_t> victims;
  std::vector<bool> taken(candidates.size(), false);
  std::int64_t total_age = 0;
  std::int64_t count = static_cast<std::int64_t>(candidates.size());
  for (const auto& c : candidates) total_age += c.age;
  std::int64_t reclaimed = 0;
  bool freed = true;
  while (reclaimed < target_bytes && freed && count > 0) {
    const double threshold = static_cast<double>(total_age) / static_cast<double>(count);
    freed = false;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      if (taken[i] || static_cast<double>(candidates[i].age) < threshold) continue;
      taken[i] = true;
      freed = true;
      reclaimed += candidates[i].size_bytes;
      total_age -= candidates[i].age;
      --count;
      victims.push_back(i);
    }
  }
  return victims;
}

}  // namespace memtune::alloc
