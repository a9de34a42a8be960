// The allocator's statistics (torch.cuda.memory_stats()) and the one place they change.
//
// PyTorch v2.x c10/core/CachingDeviceAllocator.h (Stat, StatArray, DeviceStats) and the
// increase_stat/decrease_stat calls in c10/cuda/CUDACachingAllocator.cpp. The simulator
// never touches a counter directly: it describes what happened as a StatEvent and hands it
// to StatsLedger::Apply (see note [stats in one place] in docs/design/allocator.md).
#pragma once

#include <array>
#include <cstdint>

#include "memtune/alloc/constants.h"

namespace memtune::alloc {

// One counter. `peak` is the maximum of `current`, updated on every increase; `allocated`
// and `freed` are the sums of all increases and decreases.
struct Stat {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocated = 0;
  std::int64_t freed = 0;

  void Increase(std::int64_t amount) {
    current += amount;
    if (current > peak) peak = current;
    allocated += amount;
  }
  void Decrease(std::int64_t amount) {
    current -= amount;
    freed += amount;
  }
};

// Index 0 = all, 1 = small_pool, 2 = large_pool (memory_stats() key order).
enum class StatType : int { kAll = 0, kSmallPool = 1, kLargePool = 2 };
using StatArray = std::array<Stat, 3>;

inline const Stat& All(const StatArray& s) { return s[0]; }

// Every counter of memory_stats() that the default pools can change (section 5.2).
struct DeviceStats {
  StatArray allocation;                   // count of allocated blocks
  StatArray segment;                      // count of native (cudaMalloc) segments
  StatArray active;                       // count of allocated + pending-free blocks
  StatArray inactive_split;               // count of free blocks in split native segments
  StatArray allocated_bytes;              // bytes; block sizes of allocated blocks
  StatArray reserved_bytes;               // bytes; cudaMalloc'd + mapped
  StatArray active_bytes;                 // bytes; allocated + pending-free blocks
  StatArray inactive_split_bytes;         // bytes; free blocks in split native segments
  StatArray requested_bytes;              // bytes; unrounded request sizes of active blocks
  Stat oversize_allocations;              // allocated blocks >= max_split_size
  Stat oversize_segments;                 // native segments >= max_split_size
  std::int64_t num_alloc_retries = 0;     // alloc_block attempts after release_cached_blocks
  std::int64_t num_ooms = 0;              // OutOfMemoryError raised by malloc
  std::int64_t num_sync_all_streams = 0;  // synchronize_and_free_events calls
  std::int64_t num_device_alloc = 0;      // cudaMalloc + segment maps
  std::int64_t num_device_free = 0;       // cudaFree + segment unmaps
};

// What happened, as far as the counters are concerned.
enum class StatEventKind : std::uint8_t {
  kBlockAllocated,      // alloc_found_block: bytes = block size, requested = orig
  kBlockFreeRequested,  // free(): bytes = block size
  kBlockFreeCompleted,  // free_block(): bytes = original block size, requested = requested_size
  kInactiveSplit,       // net change: count = blocks, bytes = bytes (may be negative)
  kSegmentAllocated,    // cudaMalloc of `bytes`
  kSegmentFreed,        // cudaFree of `bytes`
  kPagesMapped,         // expandable segment_map of `bytes`
  kPagesUnmapped,       // expandable segment_unmap of `bytes`
  kAllocRetry,          // alloc_block(retry = true)
  kOom,                 // malloc raised OutOfMemoryError
  kSyncAllStreams,      // synchronize_and_free_events
};

struct StatEvent {
  StatEventKind kind;
  PoolKind pool = PoolKind::kLarge;
  bool oversize = false;  // the block/segment is >= max_split_size
  std::int64_t bytes = 0;
  std::int64_t requested = 0;  // bytes
  std::int64_t count = 0;      // kInactiveSplit only
};

// Owns DeviceStats; Apply is the only mutator. Not thread-safe (one simulator, one thread).
class StatsLedger {
 public:
  const DeviceStats& stats() const { return stats_; }

  // reset_peak_memory_stats(): every peak becomes current.
  void ResetPeaks();

  // The one mutator: applies what `e` describes to the counters.
  [[gnu::always_inline]] void Apply(const StatEvent& e) {
    // The pool's array index as a constant, so every counter is at a fixed offset.
    if (e.pool == PoolKind::kLarge) {
      ApplyTo<2>(e);
    } else {
      ApplyTo<1>(e);
    }
  }

 private:
  // Apply for pool index kPool (1 = small_pool, 2 = large_pool; index 0 = all).
  template <int kPool>
  [[gnu::always_inline]] void ApplyTo(const StatEvent& e) {
    auto up = [](StatArray& a, std::int64_t n) {
      a[0].Increase(n);
      a[kPool].Increase(n);
    };
    auto down = [](StatArray& a, std::int64_t n) {
      a[0].Decrease(n);
      a[kPool].Decrease(n);
    };
    DeviceStats& s = stats_;
    switch (e.kind) {
      case StatEventKind::kBlockAllocated:
        up(s.allocation, 1);
        up(s.allocated_bytes, e.bytes);
        up(s.active, 1);
        up(s.active_bytes, e.bytes);
        up(s.requested_bytes, e.requested);
        if (e.oversize) s.oversize_allocations.Increase(1);
        break;
      case StatEventKind::kBlockFreeRequested:
        down(s.allocation, 1);
        down(s.allocated_bytes, e.bytes);
        if (e.oversize) s.oversize_allocations.Decrease(1);
        break;
      case StatEventKind::kBlockFreeCompleted:
        down(s.active, 1);
        down(s.active_bytes, e.bytes);
        down(s.requested_bytes, e.requested);
        break;
      case StatEventKind::kInactiveSplit:  // net changes: either sign, or none
        if (e.count > 0) up(s.inactive_split, e.count);
        if (e.count < 0) down(s.inactive_split, -e.count);
        if (e.bytes > 0) up(s.inactive_split_bytes, e.bytes);
        if (e.bytes < 0) down(s.inactive_split_bytes, -e.bytes);
        break;
      case StatEventKind::kSegmentAllocated:
        up(s.segment, 1);
        up(s.reserved_bytes, e.bytes);
        ++s.num_device_alloc;
        if (e.oversize) s.oversize_segments.Increase(1);
        break;
      case StatEventKind::kSegmentFreed:
        down(s.segment, 1);
        down(s.reserved_bytes, e.bytes);
        ++s.num_device_free;
        if (e.oversize) s.oversize_segments.Decrease(1);
        break;
      case StatEventKind::kPagesMapped:
        up(s.reserved_bytes, e.bytes);
        ++s.num_device_alloc;
        break;
      case StatEventKind::kPagesUnmapped:
        down(s.reserved_bytes, e.bytes);
        ++s.num_device_free;
        break;
      case StatEventKind::kAllocRetry:
        ++s.num_alloc_retries;
        break;
      case StatEventKind::kOom:
        ++s.num_ooms;
        break;
      case StatEventKind::kSyncAllStreams:
        ++s.num_sync_all_streams;
        break;
    }
  }

  DeviceStats stats_;
};

}  // namespace memtune::alloc
