// Simulator: PyTorch's native CUDA caching allocator (one device), native and expandable
// segments, as a value you drive with Alloc / Free / RecordStream / EmptyCache.
//
// The allocation path, its retries (cache, GC, release of oversize blocks, empty_cache),
// splitting, merging, record_stream deferral, memory fraction and statistics follow
// docs/shared allocator.md sections 3-5 (PyTorch c10/cuda/CUDACachingAllocator.cpp). Not
// modelled: private pools (CUDA graphs, MemPool), IPC, multi-device; see
// docs/design/allocator.md [scope].
//
// Device addresses are deterministic: see note [address model] in docs/design/allocator.md;
// a replay can substitute recorded addresses with SetAddressOracle.
//
// Thread safety: none; use one Simulator per thread. No globals: two Simulators with
// different configs can run side by side.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "memtune/alloc/block.h"
#include "memtune/alloc/config.h"
#include "memtune/alloc/oom_message.h"
#include "memtune/alloc/stats.h"
#include "memtune/core/result.h"
#include "memtune/core/units.h"

namespace memtune::alloc {

// A caller-chosen dense id for one tensor allocation (the trace reader interns names).
// Ids index a table, so keep them small and reuse them after Free.
using HandleId = std::uint32_t;

// When a free() deferred by record_stream completes (its CUDA events are done).
enum class PendingFreeCompletion {
  kAtNextMalloc,  // at the start of the next Alloc (process_events found the events done)
  kExplicit,      // only at FreeCompleted(handle), EmptyCache, or the OOM retry (sync)
};

struct SimulatorOptions {
  AllocatorConfig config;                   // parsed PYTORCH_CUDA_ALLOC_CONF + version
  std::int64_t capacity_bytes = 80 * kGiB;  // device total (cudaMemGetInfo total)
  std::int64_t non_pytorch_bytes = 0;       // memory this process holds outside the allocator
                                            // (CUDA context, NCCL, cuBLAS workspaces)
  int device_index = 0;                     // printed in the OOM message
  std::optional<double> memory_fraction;    // set_per_process_memory_fraction() at start
  bool nvml_available = true;               // OOM message lists this process's memory
  PendingFreeCompletion pending_frees = PendingFreeCompletion::kAtNextMalloc;
};

// What the allocator did, in PyTorch trace-entry terms (snapshot `device_traces` actions).
enum class AllocatorEventKind : std::uint8_t {
  kAlloc,          // address = block start, size = orig request
  kFreeRequested,  // address = block start, size = requested size
  kFreeCompleted,  // address = block start (before merging), size = requested size
  kSegmentAlloc,   // cudaMalloc: address, size = segment bytes
  kSegmentFree,    // cudaFree
  kSegmentMap,     // expandable pages mapped: address = range start, size = bytes
  kSegmentUnmap,   // expandable pages unmapped
  kOom,            // address = device free bytes, size = rounded request
};

struct AllocatorEvent {
  AllocatorEventKind kind;
  std::uint64_t address = 0;
  std::int64_t size_bytes = 0;
  StreamId stream = 0;
  PoolKind pool = PoolKind::kLarge;
};

// Receives every AllocatorEvent as it happens (only called when set).
using AllocatorObserver = std::function<void(const AllocatorEvent&)>;

// A request for a new device address range: a cudaMalloc'd segment (`expandable` false,
// size = segment bytes) or the virtual range of a new expandable segment (size = VA bytes).
struct SegmentRequest {
  bool expandable = false;
  std::int64_t size_bytes = 0;
  StreamId stream = 0;
  PoolKind pool = PoolKind::kLarge;
};

// Returns the address to use for a request, or nullopt for the built-in address model.
// The caller must not return ranges that overlap live ones.
using AddressOracle = std::function<std::optional<std::uint64_t>(const SegmentRequest&)>;

enum class AllocStatus : std::uint8_t {
  kOk,
  kOutOfMemory,  // PyTorch raised OutOfMemoryError; see last_oom(); the handle stays unused
  kHandleInUse,  // the handle already names a live allocation (caller error)
};

struct AllocResult {
  AllocStatus status = AllocStatus::kOk;
  std::uint64_t address = 0;          // 0 for a zero-byte request (PyTorch returns nullptr)
  std::int64_t block_size_bytes = 0;  // what allocated_bytes grew by
};

enum class FreeStatus : std::uint8_t {
  kFreed,         // memory returned to the cache (free_completed)
  kPending,       // free requested; waits for record_stream events
  kNotAllocated,  // the handle names no live allocation (unknown or already freed)
  kNotPending,    // FreeCompleted on a handle with no pending free
  kSameStream,    // RecordStream on the block's own stream: ignored, as in PyTorch
  kRecorded,      // RecordStream registered a use on another stream
};

// One block as a snapshot lists it.
struct BlockInfo {
  std::uint64_t address = 0;
  std::int64_t size_bytes = 0;
  std::int64_t requested_bytes = 0;  // stale for inactive blocks, as in PyTorch
  BlockState state = BlockState::kFree;
};

// One segment as a snapshot lists it: a cudaMalloc'd range, or a maximal mapped run of an
// expandable segment.
struct SegmentInfo {
  std::uint64_t address = 0;
  std::int64_t total_size_bytes = 0;
  StreamId stream = 0;
  PoolKind pool = PoolKind::kLarge;
  bool is_expandable = false;
  std::vector<BlockInfo> blocks;  // address order, contiguous
};

class Simulator {
 public:
  // Example:
  //   auto cfg = ParseAllocatorConfig("expandable_segments:True", {2, 4});
  //   Simulator sim({.config = *cfg, .capacity_bytes = 80 * kGiB});
  //   sim.Alloc(/*handle=*/0, 100 * kMiB);   sim.Free(0);
  explicit Simulator(SimulatorOptions options);
  ~Simulator();
  Simulator(Simulator&&) noexcept;
  Simulator& operator=(Simulator&&) noexcept;

  // caching_allocator malloc(size, stream) for `handle`. A zero-byte request succeeds
  // without touching the allocator; a request >= 2^60 fails before it (no counters).
  AllocResult Alloc(HandleId handle, std::int64_t size_bytes, StreamId stream = 0);
  // Alloc(handle, size_bytes, stream) whose block records `requested_bytes` as its request
  // (requested_size, the alloc event, the requested-bytes stats): a replay recreating a
  // block allocated before its trace, whose size and recorded request are both known.
  // Requires 0 <= requested_bytes <= size_bytes.
  AllocResult AllocRecorded(HandleId handle, std::int64_t size_bytes, std::int64_t requested_bytes,
                            StreamId stream = 0);
  // free(): kFreed, or kPending when record_stream used another stream.
  FreeStatus Free(HandleId handle);
  // The deferred free of `handle` completes now (its events finished).
  FreeStatus FreeCompleted(HandleId handle);
  // recordStream(block, stream): kRecorded, kSameStream or kNotAllocated.
  FreeStatus RecordStream(HandleId handle, StreamId stream);
  // torch.cuda.empty_cache(): sync all events, return whole free segments / free pages.
  void EmptyCache();
  // torch.cuda.set_per_process_memory_fraction(fraction), per the version's semantics.
  // `fraction` must be in [0, 1] (checked by callers; out-of-range is a programmer error).
  void SetMemoryFraction(double fraction);
  // Changes the device capacity or outside-PyTorch usage for later allocations.
  void SetCapacity(std::int64_t capacity_bytes);
  void SetNonPytorchBytes(std::int64_t bytes);
  // torch.cuda.reset_peak_memory_stats().
  void ResetPeakStats();

  const DeviceStats& stats() const;
  const SimulatorOptions& options() const;
  // The report of the most recent OOM (nullopt before the first).
  const std::optional<OomReport>& last_oom() const;
  // The message PyTorch would raise for last_oom() (empty before the first OOM).
  std::string LastOomMessage() const;
  // Bytes the device has free: capacity - non_pytorch - reserved (>= 0).
  std::int64_t DeviceFreeBytes() const;

  void SetObserver(AllocatorObserver observer);
  void SetAddressOracle(AddressOracle oracle);

  // The live allocation of `handle` (address, block size), or nullopt.
  std::optional<BlockInfo> Lookup(HandleId handle) const;
  // All segments, sorted by address, as torch.cuda.memory_snapshot() would list them.
  std::vector<SegmentInfo> Segments() const;
  // Checks the allocator's structural and statistical invariants (allocator.md 5.3):
  // reserved = sum of segment sizes <= capacity, allocated <= reserved, counters match the
  // blocks, blocks are contiguous and never overlap, no two free neighbours are unmerged,
  // the free sets hold exactly the free blocks. Error kInternal naming the first violation.
  Status CheckInvariants() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace memtune::alloc
