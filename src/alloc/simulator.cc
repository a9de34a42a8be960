// The malloc/free path of the simulated DeviceCachingAllocator.
// PyTorch v2.x c10/cuda/CUDACachingAllocator.cpp: malloc(), get_free_block(), alloc_block(),
// alloc_found_block(), free(), free_block(), try_merge_blocks(), recordStream().
#include <utility>

#include "alloc/simulator_impl.h"

namespace memtune::alloc {

Simulator::Impl::Impl(SimulatorOptions options)
    : options_(std::move(options)), rules_(options_.config.rules()) {
  if (options_.config.per_process_memory_fraction) {
    SetMemoryFraction(*options_.config.per_process_memory_fraction);
  }
  if (options_.memory_fraction) SetMemoryFraction(*options_.memory_fraction);
}

// The public entry points of the hot path live here, with their Impl bodies inlined.
AllocResult Simulator::Alloc(HandleId handle, std::int64_t size_bytes, StreamId stream) {
  return impl_->Alloc(handle, size_bytes, -1, stream);
}
AllocResult Simulator::AllocRecorded(HandleId handle, std::int64_t size_bytes,
                                     std::int64_t requested_bytes, StreamId stream) {
  MEMTUNE_CHECK(requested_bytes >= 0 && requested_bytes <= size_bytes,
                "recorded request outside [0, size]");
  return impl_->Alloc(handle, size_bytes, requested_bytes, stream);
}
FreeStatus Simulator::Free(HandleId handle) { return impl_->Free(handle); }

void Simulator::Impl::GrowHandles(HandleId handle) {
  handles_.resize(static_cast<std::size_t>(handle) + 1, kNoBlock);
}

void Simulator::Impl::SetMemoryFraction(double fraction) {
  MEMTUNE_CHECK(fraction >= 0.0 && fraction <= 1.0, "memory fraction outside [0, 1]");
  // 2.2-2.9: any call sets the limit (even 1.0); 2.10+: 1.0 means "no limit".
  if (rules_.fraction_only_below_one && fraction >= 1.0) {
    allowed_memory_maximum_.reset();
    return;
  }
  allowed_memory_maximum_ =
      static_cast<std::int64_t>(fraction * static_cast<double>(options_.capacity_bytes));
}

AllocResult Simulator::Impl::Alloc(HandleId handle, std::int64_t size_bytes,
                                   std::int64_t recorded_request, StreamId stream) {
  if (handle >= handles_.size()) [[unlikely]]
    GrowHandles(handle);
  BlockId& slot = handles_[handle];
  if (slot != kNoBlock) {
    const bool pending = slot >= 0 && arena_[slot].state == BlockState::kPendingFree;
    if (!pending) return AllocResult{AllocStatus::kHandleInUse, 0, 0};
    slot = kNoBlock;  // the pending block lives on without a handle until its events finish
  }
  if (size_bytes == 0) {  // PyTorch returns nullptr without calling the allocator
    slot = kNullAllocation;
    return AllocResult{};
  }
  AllocParams p;
  p.recorded_request = recorded_request;
  if (!Malloc(size_bytes, stream, p)) return AllocResult{AllocStatus::kOutOfMemory, 0, 0};
  Block& b = arena_[p.block];
  b.owner = handle;
  slot = p.block;
  return AllocResult{AllocStatus::kOk, b.ptr, b.size};
}

bool Simulator::Impl::Malloc(std::int64_t orig, StreamId stream, AllocParams& p) {
  if (orig >= kOneExaByte) {  // NativeCachingAllocator::allocate() checks before malloc()
    last_oom_ = OomReport{};
    last_oom_->exabyte_request = true;
    last_oom_->requested_bytes = orig;
    return false;
  }
  if (options_.pending_frees == PendingFreeCompletion::kAtNextMalloc && !pending_.empty()) {
    ProcessEvents();
  }
  const AllocatorConfig& c = cfg();
  p.size = RoundSize(orig, c.roundup_power2_divisions, rules_.roundup_needs_two_divisions);
  p.pool = PoolFor(p.size);
  p.alloc_size = AllocationSize(p.size, c);
  p.stream = stream;
  // trigger_free_memory_callbacks() has nothing to free here (no CUDA IPC).
  bool found = GetFreeBlock(p);
  if (!found) {
    if (GcEnabled()) GarbageCollectCachedBlocks();
    found = AllocBlock(p, false) || (ReleaseAvailableCachedBlocks(p) && AllocBlock(p, false)) ||
            (ReleaseCachedBlocks() && AllocBlock(p, true));
  }
  if (!found) {
    RecordOom(p, orig);
    return false;
  }
  const bool split = ShouldSplit(arena_[p.block].size, p.size, p.pool, c.expandable_segments,
                                 c.max_split_size_bytes);
  p.block = AllocFoundBlock(p, orig, split);
  return true;
}

bool Simulator::Impl::GetFreeBlock(AllocParams& p) {
  PoolState& ps = pool(p.pool);
  if (GcEnabled()) ++ps.get_free_blocks_call_count;  // tracks block reuse only for GC
  const BestFitRules rules{cfg().expandable_segments, cfg().max_split_size_bytes,
                           cfg().max_non_split_rounding_bytes};
  const auto at = FindBestFit(ps.blocks, arena_, p.stream, p.size, rules);
  if (!at) return false;
  p.block = ps.blocks.IdAt(*at);
  p.cached = true;
  return true;
}

bool Simulator::Impl::AllocBlock(AllocParams& p, bool is_retry) {
  if (is_retry) ledger_.Apply({StatEventKind::kAllocRetry});
  if (FractionSet() && total_allocated_memory_ + p.alloc_size > *allowed_memory_maximum_) {
    return false;  // the allocator refuses itself; no cudaMalloc call
  }
  if (cfg().expandable_segments) {
    p.block = TryAllocateExpandableBlock(p);
    return p.block != kNoBlock;
  }
  // cudaMalloc succeeds iff the device still has room (allocator.md 10.2 capacity model).
  if (total_allocated_memory_ + options_.non_pytorch_bytes + p.alloc_size >
      options_.capacity_bytes) {
    return false;
  }
  const auto address = NewAddress(SegmentRequest{false, p.alloc_size, p.stream, p.pool});
  if (!address) return false;
  total_allocated_memory_ += p.alloc_size;
  const BlockId id = arena_.New();
  Block& b = arena_[id];
  b.ptr = *address;
  b.size = p.alloc_size;
  b.stream = p.stream;
  b.pool = p.pool;
  ledger_.Apply({StatEventKind::kSegmentAllocated, p.pool, Oversize(p.alloc_size), p.alloc_size});
  Emit(AllocatorEventKind::kSegmentAlloc, b.ptr, b.size, b.stream, b.pool);
  p.block = id;
  return true;
}

BlockId Simulator::Impl::AllocFoundBlock(const AllocParams& p, std::int64_t orig, bool split) {
  BlockId id = p.block;
  const bool already_split = arena_[id].is_split();
  const bool expandable = arena_[id].is_expandable();
  if (split) {
    // The head becomes the allocation; the ORIGINAL block object keeps the remainder and its
    // stale requested_size (allocator.md 3.12).
    const BlockId head = arena_.New();
    Block& rest = arena_[id];
    Block& h = arena_[head];
    h.ptr = rest.ptr;
    h.size = p.size;
    h.stream = p.stream;
    h.pool = p.pool;
    h.expandable_segment = rest.expandable_segment;
    h.prev = rest.prev;
    h.next = id;
    if (h.prev != kNoBlock) arena_[h.prev].next = head;
    rest.prev = head;
    const std::uint64_t old_ptr = rest.ptr;
    rest.ptr += static_cast<std::uint64_t>(p.size);
    rest.size -= p.size;
    if (p.cached) {  // get_free_block's erase and the remainder's insert in one step
      rest.gc_count_base = pool(p.pool).get_free_blocks_call_count;  // insert_into_blocks()
      rest.free_slot =
          pool(p.pool).blocks.Replace(rest.free_slot, old_ptr, id, rest.size, rest.ptr, id);
    } else {
      InsertFree(id);
    }
    if (!expandable && already_split) {
      ledger_.Apply({StatEventKind::kInactiveSplit, p.pool, false, -p.size, 0, 0});
    } else if (!expandable) {
      ledger_.Apply({StatEventKind::kInactiveSplit, p.pool, false, rest.size, 0, 1});
    }
    id = head;
  } else {
    if (p.cached) EraseFree(id);
    if (already_split && !expandable) {
      ledger_.Apply({StatEventKind::kInactiveSplit, p.pool, false, -arena_[id].size, 0, -1});
    }
  }
  Block& b = arena_[id];
  const std::int64_t requested = p.recorded_request >= 0 ? p.recorded_request : orig;
  b.state = BlockState::kAllocated;
  b.requested_size = requested;
  b.stream_used = false;
  Emit(AllocatorEventKind::kAlloc, b.ptr, requested, b.stream, b.pool);
  ledger_.Apply({StatEventKind::kBlockAllocated, b.pool, Oversize(b.size), b.size, requested});
  return id;
}

FreeStatus Simulator::Impl::Free(HandleId handle) {
  if (handle >= handles_.size() || handles_[handle] == kNoBlock) return FreeStatus::kNotAllocated;
  BlockId id = handles_[handle];
  if (id == kNullAllocation) {
    handles_[handle] = kNoBlock;
    return FreeStatus::kFreed;
  }
  Block& b = arena_[id];
  if (b.state != BlockState::kAllocated) return FreeStatus::kNotAllocated;
  ledger_.Apply({StatEventKind::kBlockFreeRequested, b.pool, Oversize(b.size), b.size});
  Emit(AllocatorEventKind::kFreeRequested, b.ptr, b.requested_size, b.stream, b.pool);
  if (b.stream_used) {  // record_stream: one event per used stream; free_block waits for them
    b.state = BlockState::kPendingFree;
    pending_.push_back(id);
    return FreeStatus::kPending;
  }
  handles_[handle] = kNoBlock;
  b.state = BlockState::kFree;
  FreeBlock(id);
  return FreeStatus::kFreed;
}

FreeStatus Simulator::Impl::FreeCompleted(HandleId handle) {
  if (handle >= handles_.size() || handles_[handle] < 0) return FreeStatus::kNotPending;
  const BlockId id = handles_[handle];
  if (arena_[id].state != BlockState::kPendingFree) return FreeStatus::kNotPending;
  CompletePending(id);
  return FreeStatus::kFreed;
}

FreeStatus Simulator::Impl::RecordStream(HandleId handle, StreamId stream) {
  if (handle >= handles_.size() || handles_[handle] == kNoBlock) return FreeStatus::kNotAllocated;
  if (handles_[handle] == kNullAllocation) return FreeStatus::kSameStream;  // nullptr: no-op
  Block& b = arena_[handles_[handle]];
  if (b.state != BlockState::kAllocated) return FreeStatus::kNotAllocated;
  if (b.stream == stream) return FreeStatus::kSameStream;
  b.stream_used = true;
  return FreeStatus::kRecorded;
}

void Simulator::Impl::FreeBlock(BlockId id) {
  Block& b = arena_[id];
  Emit(AllocatorEventKind::kFreeCompleted, b.ptr, b.requested_size, b.stream, b.pool);
  const std::int64_t original_size = b.size;
  const std::int64_t requested = b.requested_size;
  const PoolKind pk = b.pool;
  const bool expandable = b.is_expandable();
  std::int64_t net_blocks = 0, net_bytes = 0;
  MergedEntry reuse;
  for (BlockId n : {b.prev, b.next}) {
    if (n == kNoBlock || arena_[n].state != BlockState::kFree) continue;  // TryMerge's own test
    const std::int64_t subsumed = TryMerge(id, n, &reuse);
    if (subsumed > 0) {
      net_blocks -= 1;
      net_bytes -= subsumed;
    }
  }
  b.state = BlockState::kFree;
  if (reuse.id != kNoBlock) {  // the neighbour's erase and this block's insert in one step
    b.gc_count_base = pool(pk).get_free_blocks_call_count;  // insert_into_blocks()
    b.free_slot = pool(pk).blocks.Replace(reuse.slot, reuse.ptr, reuse.id, b.size, b.ptr, id);
  } else {
    InsertFree(id);
  }
  if (b.is_split()) {
    net_blocks += 1;
    net_bytes += b.size;
  }
  if (!expandable)
    ledger_.Apply({StatEventKind::kInactiveSplit, pk, false, net_bytes, 0, net_blocks});
  ledger_.Apply({StatEventKind::kBlockFreeCompleted, pk, false, original_size, requested});
}

void Simulator::Impl::InsertFree(BlockId id) {
  Block& b = arena_[id];
  PoolState& ps = pool(b.pool);
  if (b.mapped) {
    b.gc_count_base = ps.get_free_blocks_call_count;
    b.free_slot = ps.blocks.Insert(b.stream, b.size, b.ptr, id);
  } else {
    b.free_slot = ps.unmapped.Insert(b.stream, 0, b.ptr, id);
  }
}

void Simulator::Impl::EraseFree(BlockId id) {
  const Block& b = arena_[id];
  PoolState& ps = pool(b.pool);
  (b.mapped ? ps.blocks : ps.unmapped).Erase(b.free_slot, b.ptr, id);
}

std::optional<std::uint64_t> Simulator::Impl::NewAddress(const SegmentRequest& request) {
  if (oracle_) {
    if (auto address = oracle_(request)) {
      address_space_.Reserve(*address, request.size_bytes);
      return address;
    }
  }
  return address_space_.Allocate(request.size_bytes);
}

}  // namespace memtune::alloc
