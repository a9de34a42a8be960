// Allocator policy functions (see include/memtune/alloc/policy.h for the contracts).
#include "memtune/alloc/policy.h"

#include <algorithm>

namespace memtune::alloc {

std::optional<FreeBlockSet::Pos> FindBestFitExpandable(const FreeBlockSet& pool,
                                                       const BlockArena& blocks, StreamId stream,
                                                       std::int64_t rounded_bytes,
                                                       const BestFitRules& rules,
                                                       FreeBlockSet::Pos first) {
  // PyTorch get_free_block(), the expandable-segment branch.
  using Pos = FreeBlockSet::Pos;
  Pos it = first;
  auto block = [&](Pos p) -> const Block& { return blocks[pool.IdAt(p)]; };
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
