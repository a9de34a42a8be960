// Inspect: what a memory snapshot says about each device, as a plain report struct.
//
// From the final allocator state (segments and blocks): reserved, allocated, active and
// inactive-split bytes, segments by pool and kind, the largest free block and how
// fragmented the free memory is, and the allocation sites holding the most live bytes.
// From the trace: reserved and live (requested) bytes over time, their peaks and what was
// live at the peak, and the recorded OOMs. See docs/snapshot.md for every field.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "memtune/core/result.h"
#include "memtune/snapshot/snapshot.h"

namespace memtune::snapshot {

struct InspectOptions {
  int frames_depth = 3;  // stack frames (innermost first) that identify an allocation site
  int top_sites = 10;    // allocation sites listed per device
};

// Live allocations grouped by their innermost `frames_depth` frames.
struct SiteUsage {
  std::vector<Frame> frames;  // empty: no stack was recorded
  std::int64_t bytes = 0;     // block bytes (final state) or requested bytes (trace peak)
  std::int64_t count = 0;     // allocations
};

// Segments of one pool kind: (small|large, native|expandable, pool id).
struct PoolSegments {
  PoolType pool = PoolType::kLarge;
  bool expandable = false;
  std::pair<std::int64_t, std::int64_t> pool_id{0, 0};
  std::int64_t segments = 0;
  std::int64_t reserved_bytes = 0;
  std::int64_t allocated_bytes = 0;
  std::int64_t largest_free_block_bytes = 0;
};

// One trace entry of action "oom".
struct OomEvent {
  std::int64_t event_index = 0;        // position in the device trace (0-based)
  std::int64_t size_bytes = 0;         // the rounded request that failed
  std::int64_t device_free_bytes = 0;  // cudaMemGetInfo free at the time
  std::int64_t stream = 0;
  std::int64_t time_us = -1;
  std::int64_t reserved_bytes = 0;     // reserved just before the OOM (rebuilt from the trace)
  std::int64_t requested_bytes = 0;    // live requested bytes at the OOM
};

// What the trace of one device shows over time. Reserved bytes are exact (every change
// of reserved memory is a segment_* entry); live bytes are the requested sizes of live
// allocations (what PyTorch's memory_viz plots), since block sizes are not in the trace.
struct TraceSummary {
  bool present = false;                // false: no trace recorded for this device
  std::int64_t entries = 0;
  bool starts_mid_run = false;         // memory was reserved or live before the first entry
  std::int64_t reserved_at_start_bytes = 0;
  std::int64_t requested_at_start_bytes = 0;
  std::int64_t peak_reserved_bytes = 0;
  std::int64_t peak_reserved_event = -1;   // entry index after which the peak held; -1: start
  std::int64_t peak_requested_bytes = 0;
  std::int64_t peak_requested_event = -1;
  std::vector<SiteUsage> live_at_peak;     // at peak_requested_event, top sites
  std::vector<OomEvent> ooms;
  std::int64_t first_time_us = -1;
  std::int64_t last_time_us = -1;
};

struct DeviceInspect {
  int device = 0;
  std::int64_t reserved_bytes = 0;        // sum of segment sizes
  std::int64_t allocated_bytes = 0;       // blocks in state active_allocated
  std::int64_t active_bytes = 0;          // allocated + active_pending_free
  std::int64_t requested_bytes = 0;       // requested sizes of active blocks
  std::int64_t inactive_split_bytes = 0;  // free blocks of native segments with > 1 block
  std::int64_t inactive_split_blocks = 0;
  std::int64_t free_bytes = 0;            // all inactive blocks
  std::int64_t reserved_unallocated_bytes = 0;  // reserved - allocated (PyTorch's OOM figure)
  std::int64_t largest_free_block_bytes = 0;    // the largest request served without new memory
  // 1 - largest_free_block / reserved_unallocated: 0 when all unallocated memory is one
  // block, near 1 when it is scattered. 0 when nothing is unallocated.
  double fragmentation = 0.0;
  std::int64_t segments = 0;
  std::int64_t live_allocations = 0;
  std::vector<PoolSegments> pools;
  std::vector<SiteUsage> top_sites;       // final live blocks by site, most bytes first
  TraceSummary trace;
  std::vector<std::string> notes;         // inconsistencies found (e.g. trace vs segments)
};

struct InspectReport {
  SnapshotFormat format = SnapshotFormat::kCurrent;
  AllocatorSettings settings;
  InspectOptions options;
  std::vector<DeviceInspect> devices;     // one per device seen, ascending
};

// Analyses `snapshot`. Errors: kInvalidConfig for options out of range ("--frames" must be
// 1-64, "--top" 1-1000); kInvalidInput "device_traces[d][i]: ..." when the trace cannot be
// replayed consistently (e.g. reserved bytes would become negative).
// Example: InspectOptions options; options.frames_depth = 2;
//          auto report = Inspect(*LoadSnapshotFile("snap.pickle"), options);
Result<InspectReport> Inspect(const Snapshot& snapshot, const InspectOptions& options = {});

// "model.py:12:forward" for a frame (file name without its directory).
std::string FormatFrame(const Frame& frame);

}  // namespace memtune::snapshot
