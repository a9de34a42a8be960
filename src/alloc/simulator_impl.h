// Simulator::Impl: the allocator state and the steps of PyTorch's DeviceCachingAllocator.
// Split across simulator.cc (malloc/free path), simulator_release.cc (GC, releases,
// events), simulator_expandable.cc (expandable segments) and simulator_inspect.cc
// (snapshot view, invariants, OOM report).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "alloc/address_space.h"
#include "memtune/alloc/block.h"
#include "memtune/alloc/policy.h"
#include "memtune/alloc/simulator.h"
#include "memtune/alloc/stats.h"

namespace memtune::alloc {

// PyTorch BlockPool: free mapped blocks (stream, size, ptr) and unmapped ranges (stream, ptr).
struct PoolState {
  FreeBlockSet blocks;
  FreeBlockSet unmapped;
  std::int64_t get_free_blocks_call_count = 0;
};

// PyTorch ExpandableSegment: a reserved virtual range mapped page by page.
struct ExpandableSegment {
  std::uint64_t base = 0;
  std::int64_t va_bytes = 0;
  std::int64_t page_bytes = 0;
  StreamId stream = 0;
  PoolKind pool = PoolKind::kLarge;
  bool live = false;
};

// PyTorch AllocParams.
struct AllocParams {
  std::int64_t size = 0;        // rounded request
  std::int64_t alloc_size = 0;  // get_allocation_size(size)
  StreamId stream = 0;
  PoolKind pool = PoolKind::kLarge;
  BlockId block = kNoBlock;
  // Set when `block` came from the pool's free set. get_free_block() removes it at once;
  // memtune removes it in alloc_found_block(), where a split replaces it by the remainder in
  // one step (nothing touches the set in between).
  bool cached = false;
  // The request recorded in the block (requested_size, alloc events, stats); -1 = the
  // caller's request. Set by Simulator::AllocRecorded only.
  std::int64_t recorded_request = -1;
};

// A free neighbour merged into a block being freed whose free-set entry is still in place,
// to be replaced by the merged block (FreeBlock). id kNoBlock = none.
struct MergedEntry {
  FreeBlockSet::Slot slot = 0;
  std::uint64_t ptr = 0;
  BlockId id = kNoBlock;
};

// Handle table entry values besides a BlockId.
inline constexpr BlockId kNullAllocation = -2;  // a live zero-byte allocation (nullptr)

class Simulator::Impl {
 public:
  explicit Impl(SimulatorOptions options);

  // --- front ends (simulator.cc) ---
  // Alloc and Free are inlined into Simulator::Alloc / Simulator::Free (simulator.cc).
  [[gnu::always_inline]] inline AllocResult Alloc(HandleId handle, std::int64_t size_bytes,
                                                  std::int64_t recorded_request, StreamId stream);
  [[gnu::always_inline]] inline FreeStatus Free(HandleId handle);
  FreeStatus FreeCompleted(HandleId handle);
  FreeStatus RecordStream(HandleId handle, StreamId stream);
  void SetMemoryFraction(double fraction);

  // --- allocation path (simulator.cc) ---
  // Malloc, GetFreeBlock and AllocFoundBlock form the per-event hot path (one caller each):
  // inlined into Alloc.
  [[gnu::always_inline]] inline bool Malloc(std::int64_t orig, StreamId stream, AllocParams& p);
  [[gnu::always_inline]] inline bool GetFreeBlock(AllocParams& p);
  bool AllocBlock(AllocParams& p, bool is_retry);
  [[gnu::always_inline]] inline BlockId AllocFoundBlock(const AllocParams& p, std::int64_t orig,
                                                        bool split);
  void FreeBlock(BlockId id);
  // Merges free neighbour `src` into `dst`; returns the bytes subsumed (0 = no merge). With
  // `reuse` (FreeBlock), the first merged neighbour's free-set entry is left in place and
  // described there instead of erased.
  [[gnu::always_inline]] inline std::int64_t TryMerge(BlockId dst, BlockId src,
                                                      MergedEntry* reuse = nullptr);
  void InsertFree(BlockId id);  // insert_into_blocks(): also resets gc_count_base
  void EraseFree(BlockId id);

  // --- releases and events (simulator_release.cc) ---
  void ProcessEvents();
  void SynchronizeAndFreeEvents();
  void CompletePending(BlockId id);
  bool ReleaseAvailableCachedBlocks(const AllocParams& p);
  bool ReleaseCachedBlocks();
  void ReleaseBlocks(PoolKind pool);
  void ReleaseBlock(BlockId id);
  void GarbageCollectCachedBlocks();

  // --- expandable segments (simulator_expandable.cc) ---
  BlockId FindExpandableBlock(StreamId stream, PoolKind pool, std::int64_t size);
  BlockId TryAllocateExpandableBlock(const AllocParams& p);
  bool MapBlock(BlockId id, std::int64_t size);
  void UnmapBlock(BlockId id);
  void ReleaseExpandableSegment(BlockId id);

  // --- inspection (simulator_inspect.cc) ---
  void RecordOom(const AllocParams& p, std::int64_t orig);
  std::vector<SegmentInfo> Segments() const;
  Status CheckInvariants() const;
  Status CheckBlocks() const;
  Status CheckCounters() const;

  // --- helpers ---
  bool FractionSet() const { return allowed_memory_maximum_.has_value(); }
  bool GcEnabled() const { return FractionSet() && cfg().garbage_collection_threshold > 0.0; }
  const AllocatorConfig& cfg() const { return options_.config; }
  bool Oversize(std::int64_t bytes) const { return bytes >= cfg().max_split_size_bytes; }
  PoolState& pool(PoolKind k) { return pools_[static_cast<std::size_t>(k)]; }
  const PoolState& pool(PoolKind k) const { return pools_[static_cast<std::size_t>(k)]; }
  std::optional<std::uint64_t> NewAddress(const SegmentRequest& request);
  void ReleaseAddress(std::uint64_t address, std::int64_t bytes) {
    address_space_.Release(address, bytes);
  }
  void Emit(AllocatorEventKind kind, std::uint64_t address, std::int64_t size, StreamId stream,
            PoolKind pool) {
    if (observer_) observer_(AllocatorEvent{kind, address, size, stream, pool});
  }
  [[gnu::noinline]] void GrowHandles(HandleId handle);  // handles_ covers `handle`

  SimulatorOptions options_;
  VersionRules rules_;
  StatsLedger ledger_;
  BlockArena arena_;
  std::array<PoolState, 2> pools_;
  std::vector<BlockId> handles_;
  std::vector<ExpandableSegment> segments_;
  std::vector<std::int32_t> free_segment_ids_;
  std::vector<BlockId> pending_;  // freed blocks waiting for record_stream events, FIFO
  internal::AddressSpace address_space_;
  std::int64_t total_allocated_memory_ = 0;  // bytes from CUDA (cudaMalloc'd + mapped)
  std::optional<std::int64_t> allowed_memory_maximum_;
  std::optional<OomReport> last_oom_;
  AllocatorObserver observer_;
  AddressOracle oracle_;
};

// PyTorch try_merge_blocks(). Defined here so free_block() and the expandable paths inline it.
inline std::int64_t Simulator::Impl::TryMerge(BlockId dst, BlockId src, MergedEntry* reuse) {
  if (src == kNoBlock) return 0;
  Block& s = arena_[src];
  Block& d = arena_[dst];
  if (s.state != BlockState::kFree || s.mapped != d.mapped) return 0;
  if (reuse != nullptr && reuse->id == kNoBlock && s.mapped) {
    *reuse = MergedEntry{s.free_slot, s.ptr, src};  // the caller replaces it (same set)
  } else {
    EraseFree(src);
  }
  if (d.prev == src) {  // [src dst]
    d.ptr = s.ptr;
    d.prev = s.prev;
    if (d.prev != kNoBlock) arena_[d.prev].next = dst;
  } else {  // [dst src]
    d.next = s.next;
    if (d.next != kNoBlock) arena_[d.next].prev = dst;
  }
  const std::int64_t subsumed = s.size;
  d.size += subsumed;
  arena_.Delete(src);
  return subsumed;
}

}  // namespace memtune::alloc
