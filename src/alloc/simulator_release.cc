// Returning memory: record_stream event processing, garbage collection, release of oversize
// blocks, empty_cache. PyTorch v2.x c10/cuda/CUDACachingAllocator.cpp: process_events(),
// synchronize_and_free_events(), garbage_collect_cached_blocks(),
// release_available_cached_blocks() (2.5+ form, skipping expandable blocks),
// release_cached_blocks(), release_blocks(), release_block().
#include <algorithm>

#include "alloc/simulator_impl.h"

namespace memtune::alloc {

void Simulator::Impl::CompletePending(BlockId id) {
  auto it = std::find(pending_.begin(), pending_.end(), id);
  MEMTUNE_CHECK(it != pending_.end(), "pending block not in the pending list");
  pending_.erase(it);
  Block& b = arena_[id];
  if (b.owner < handles_.size() && handles_[b.owner] == id) handles_[b.owner] = kNoBlock;
  b.state = BlockState::kFree;
  FreeBlock(id);
}

void Simulator::Impl::ProcessEvents() {
  // Every recorded event is taken as complete by the next malloc (PendingFreeCompletion).
  while (!pending_.empty()) CompletePending(pending_.front());
}

void Simulator::Impl::SynchronizeAndFreeEvents() {
  ledger_.Apply({StatEventKind::kSyncAllStreams});
  while (!pending_.empty()) CompletePending(pending_.front());
}

void Simulator::Impl::ReleaseBlock(BlockId id) {
  Block& b = arena_[id];
  MEMTUNE_CHECK(!b.is_expandable() && !b.is_split(), "release_block on a non-segment block");
  Emit(AllocatorEventKind::kSegmentFree, b.ptr, b.size, b.stream, b.pool);
  total_allocated_memory_ -= b.size;
  ledger_.Apply({StatEventKind::kSegmentFreed, b.pool, Oversize(b.size), b.size});
  EraseFree(id);
  ReleaseAddress(b.ptr, b.size);
  arena_.Delete(id);
}

void Simulator::Impl::GarbageCollectCachedBlocks() {
  const auto threshold = static_cast<std::int64_t>(cfg().garbage_collection_threshold *
                                                   static_cast<double>(*allowed_memory_maximum_));
  if (total_allocated_memory_ <= threshold) return;
  const std::int64_t target = total_allocated_memory_ - threshold;
  PoolState& large = pool(PoolKind::kLarge);
  std::vector<GcCandidate> candidates;
  std::vector<BlockId> ids;
  large.blocks.ForEach([&](const FreeKey& k) {
    const Block& b = arena_[k.id];
    if (b.is_split() || b.is_expandable()) return;
    candidates.push_back({b.size, large.get_free_blocks_call_count - b.gc_count_base});
    ids.push_back(k.id);
  });
  large.blocks.BeginBatchErase();  // the victims leave only the large pool's block set
  for (std::size_t i : SelectGcVictims(candidates, target)) ReleaseBlock(ids[i]);
  large.blocks.EndBatchErase();
}

bool Simulator::Impl::ReleaseAvailableCachedBlocks(const AllocParams& p) {
  if (!cfg().HasMaxSplitSize()) return false;
  const std::int64_t mss = cfg().max_split_size_bytes;
  FreeBlockSet& set = pool(p.pool).blocks;
  const std::int64_t key_size = std::max(p.size, mss);
  FreeBlockSet::Pos it = set.LowerBound(p.stream, key_size);
  if (!set.IsEnd(it) && set.At(it).stream() == p.stream && !arena_[set.At(it).id].is_expandable()) {
    ReleaseBlock(set.At(it).id);  // one oversize block is big enough
    return true;
  }
  // No single block is large enough: free oversize blocks from the largest down.
  if (set.IsBegin(it) || set.empty()) return false;
  std::int64_t released = 0;
  it = set.Prev(it);
  while (released < key_size && set.At(it).size() >= mss && set.At(it).stream() == p.stream) {
    const FreeBlockSet::Pos cur = it;
    const bool is_first = set.IsBegin(cur);
    if (!is_first) it = set.Prev(it);
    const BlockId id = set.At(cur).id;
    if (!arena_[id].is_expandable()) {
      released += arena_[id].size;
      ReleaseBlock(id);  // erases `cur`; positions before it do not move
    }
    if (is_first) break;
  }
  return released >= key_size;
}

bool Simulator::Impl::ReleaseCachedBlocks() {
  SynchronizeAndFreeEvents();
  ReleaseBlocks(PoolKind::kLarge);
  ReleaseBlocks(PoolKind::kSmall);
  return true;
}

void Simulator::Impl::ReleaseBlocks(PoolKind kind) {
  std::vector<BlockId> whole_segments, to_unmap;
  pool(kind).blocks.ForEach([&](const FreeKey& k) {
    const Block& b = arena_[k.id];
    if (b.is_expandable()) {
      to_unmap.push_back(k.id);
    } else if (!b.is_split()) {
      whole_segments.push_back(k.id);
    }
  });
  pool(kind).blocks.BeginBatchErase();  // whole segments leave only this block set
  for (BlockId id : whole_segments) ReleaseBlock(id);
  pool(kind).blocks.EndBatchErase();
  for (BlockId id : to_unmap) {
    UnmapBlock(id);
    const Block& b = arena_[id];
    if (!b.mapped && !b.is_split()) ReleaseExpandableSegment(id);  // whole VA unmapped
  }
}

}  // namespace memtune::alloc
