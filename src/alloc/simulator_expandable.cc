// Expandable segments: growing by mapping pages, shrinking by unmapping whole free pages.
// PyTorch v2.x c10/cuda/CUDACachingAllocator.cpp: find_expandable_block(),
// try_allocate_expandable_block(), map_block(), unmap_block(), release_expandable_segment(),
// and ExpandableSegment::map/unmap. See note [expandable growth] in docs/design/allocator.md.
#include <algorithm>

#include "alloc/simulator_impl.h"

namespace memtune::alloc {

BlockId Simulator::Impl::FindExpandableBlock(StreamId stream, PoolKind kind, std::int64_t size) {
  auto allocatable = [&](BlockId id) {
    return id != kNoBlock && arena_[id].state == BlockState::kFree;
  };
  auto has_room = [&](BlockId id) {
    std::int64_t bytes = 0;
    while (bytes < size && allocatable(id)) {
      bytes += arena_[id].size;
      id = arena_[id].next;
    }
    return bytes >= size;
  };
  // The lowest-address unmapped range of this stream (plus a free block just before it)
  // that adds up to `size`.
  const FreeBlockSet& unmapped = pool(kind).unmapped;
  for (FreeBlockSet::Pos i = unmapped.LowerBound(stream, 0);
       !unmapped.IsEnd(i) && unmapped.At(i).stream() == stream; i = unmapped.Next(i)) {
    BlockId c = unmapped.At(i).id;
    if (allocatable(arena_[c].prev)) c = arena_[c].prev;
    if (has_room(c)) return c;
  }
  // A new segment: one unmapped block covering the whole reservation.
  const std::int64_t page = ExpandablePageBytes(kind, cfg());
  const std::int64_t va = ExpandableReservationBytes(options_.capacity_bytes, page);
  const auto base = NewAddress(SegmentRequest{true, va, stream, kind});
  if (!base) return kNoBlock;
  std::int32_t seg_id;
  if (!free_segment_ids_.empty()) {
    seg_id = free_segment_ids_.back();
    free_segment_ids_.pop_back();
  } else {
    seg_id = static_cast<std::int32_t>(segments_.size());
    segments_.emplace_back();
  }
  segments_[static_cast<std::size_t>(seg_id)] =
      ExpandableSegment{*base, va, page, stream, kind, true};
  const BlockId id = arena_.New();
  Block& b = arena_[id];
  b.ptr = *base;
  b.size = va;
  b.stream = stream;
  b.pool = kind;
  b.mapped = false;
  b.expandable_segment = seg_id;
  InsertFree(id);
  return id;
}

BlockId Simulator::Impl::TryAllocateExpandableBlock(const AllocParams& p) {
  BlockId c = FindExpandableBlock(p.stream, p.pool, p.size);
  if (c == kNoBlock) return kNoBlock;
  // c is one of: unmapped -> null; unmapped -> free -> ...; free -> unmapped -> ...
  if (!arena_[c].mapped && !MapBlock(c, std::min(arena_[c].size, p.size))) return kNoBlock;
  while (arena_[c].size < p.size) {
    // Invariant: free -> unmapped. Mapping the next range merges c into it.
    const BlockId n = arena_[c].next;
    if (!MapBlock(n, std::min(p.size - arena_[c].size, arena_[n].size))) return kNoBlock;
    c = n;
  }
  EraseFree(c);
  return c;
}

bool Simulator::Impl::MapBlock(BlockId id, std::int64_t size) {
  const Block& u = arena_[id];
  const ExpandableSegment& seg = segments_[static_cast<std::size_t>(u.expandable_segment)];
  const std::int64_t offset = static_cast<std::int64_t>(u.ptr - seg.base);
  const PageRange pages = PagesToMap(offset, size, seg.page_bytes);
  const std::int64_t bytes = pages.count() * seg.page_bytes;
  // One cuMemCreate per page; if any fails, the pages of this call are released again.
  if (total_allocated_memory_ + options_.non_pytorch_bytes + bytes > options_.capacity_bytes)
    return false;
  const std::uint64_t range_ptr = u.ptr;
  EraseFree(id);
  arena_[id].mapped = true;
  if (bytes < arena_[id].size) {
    const BlockId rest = arena_.New();
    Block& r = arena_[rest];
    Block& m = arena_[id];
    r.ptr = m.ptr + static_cast<std::uint64_t>(bytes);
    r.size = m.size - bytes;
    r.stream = m.stream;
    r.pool = m.pool;
    r.mapped = false;
    r.expandable_segment = m.expandable_segment;
    r.prev = id;
    r.next = m.next;
    if (m.next != kNoBlock) arena_[m.next].prev = rest;
    m.next = rest;
    m.size = bytes;
    InsertFree(rest);
  }
  TryMerge(id, arena_[id].prev);
  TryMerge(id, arena_[id].next);
  InsertFree(id);
  total_allocated_memory_ += bytes;
  const Block& m = arena_[id];
  ledger_.Apply({StatEventKind::kPagesMapped, m.pool, false, bytes});
  Emit(AllocatorEventKind::kSegmentMap, range_ptr, bytes, m.stream, m.pool);
  return true;
}

void Simulator::Impl::UnmapBlock(BlockId id) {
  const Block& b0 = arena_[id];
  const ExpandableSegment& seg = segments_[static_cast<std::size_t>(b0.expandable_segment)];
  const std::int64_t offset = static_cast<std::int64_t>(b0.ptr - seg.base);
  const PageRange pages = PagesToUnmap(offset, b0.size, seg.page_bytes);
  if (pages.count() == 0) return;
  const std::uint64_t range_ptr =
      seg.base + static_cast<std::uint64_t>(pages.first * seg.page_bytes);
  const std::int64_t bytes = pages.count() * seg.page_bytes;
  EraseFree(id);
  const std::int64_t before = static_cast<std::int64_t>(range_ptr - b0.ptr);
  const std::int64_t after = b0.size - before - bytes;
  auto make_free = [&](std::uint64_t ptr, std::int64_t size, BlockId prev, BlockId next) {
    const BlockId nb = arena_.New();
    Block& n = arena_[nb];
    const Block& b = arena_[id];
    n.ptr = ptr;
    n.size = size;
    n.stream = b.stream;
    n.pool = b.pool;
    n.expandable_segment = b.expandable_segment;
    n.prev = prev;
    n.next = next;
    if (prev != kNoBlock) arena_[prev].next = nb;
    if (next != kNoBlock) arena_[next].prev = nb;
    InsertFree(nb);  // requested_size 0: a fresh block
  };
  const std::uint64_t old_ptr = b0.ptr;
  if (before > 0) make_free(old_ptr, before, arena_[id].prev, id);
  if (after > 0)
    make_free(range_ptr + static_cast<std::uint64_t>(bytes), after, id, arena_[id].next);
  Block& b = arena_[id];
  b.ptr = range_ptr;
  b.size = bytes;
  b.mapped = false;
  TryMerge(id, arena_[id].prev);
  TryMerge(id, arena_[id].next);
  InsertFree(id);
  total_allocated_memory_ -= bytes;
  ledger_.Apply({StatEventKind::kPagesUnmapped, arena_[id].pool, false, bytes});
  Emit(AllocatorEventKind::kSegmentUnmap, range_ptr, bytes, arena_[id].stream, arena_[id].pool);
}

void Simulator::Impl::ReleaseExpandableSegment(BlockId id) {
  const Block& b = arena_[id];
  ExpandableSegment& seg = segments_[static_cast<std::size_t>(b.expandable_segment)];
  MEMTUNE_CHECK(!b.mapped && b.size == seg.va_bytes, "expandable block disagrees with its segment");
  EraseFree(id);
  ReleaseAddress(seg.base, seg.va_bytes);
  seg.live = false;
  free_segment_ids_.push_back(b.expandable_segment);
  arena_.Delete(id);
}

}  // namespace memtune::alloc
