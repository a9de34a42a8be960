// Replay: drive the allocator simulator (memtune/alloc) with the malloc/free calls of a
// snapshot's trace.
//
// Under the snapshot's own settings the replay is a check: every segment event the
// simulator emits (segment_alloc/free/map/unmap, with addresses) and every chosen block
// address must equal the recorded ones; the first difference is reported. Under another
// PYTORCH_CUDA_ALLOC_CONF it is a what-if: peak reserved and the OOM verdict, side by side
// with what was recorded. Traces that start mid-run are rebuilt from the final state first.
// Recipe: docs/allocator.md section 10; details in docs/snapshot.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "memtune/alloc/config.h"
#include "memtune/core/result.h"
#include "memtune/snapshot/snapshot.h"

namespace memtune::snapshot {

struct ReplayOptions {
  // The configuration to replay under; nullopt = the snapshot's own allocator_settings
  // (their PYTORCH_CUDA_ALLOC_CONF string, or the defaults when none was recorded).
  std::optional<std::string> alloc_conf;
  // Device memory available to PyTorch (capacity minus non-PyTorch memory), in bytes;
  // nullopt = calibrated from the first recorded OOM (its device_free plus what was
  // reserved then), else bounded by the trace's OOM-retry releases (just below the reserved
  // memory plus the segment whose cudaMalloc failed), else unlimited.
  std::optional<std::int64_t> capacity_bytes;
  alloc::TorchVersion torch_version = alloc::kDefaultTorchVersion;
};

// The first place where the replay and the recording disagree.
struct Divergence {
  std::int64_t event_index = 0;  // position in the device trace (0-based)
  std::string recorded;          // e.g. "segment_alloc 0x7f0200000000 100.00 MiB"
  std::string replayed;          // what the simulator did instead
};

// What was recorded, rebuilt from the trace and the final state.
struct RecordedOutcome {
  std::int64_t peak_reserved_bytes = 0;
  bool oom = false;
  std::int64_t oom_event_index = -1;   // first OOM
  std::int64_t oom_request_bytes = 0;  // its rounded request
  std::int64_t oom_device_free_bytes = 0;
  std::int64_t oom_reserved_bytes = 0;  // reserved at that OOM
  // reserved - allocated at that OOM, from the own-settings replay; -1 when unknown
  // (allocated block sizes are not in the trace).
  std::int64_t oom_reserved_unallocated_bytes = -1;
};

// What the simulator did.
struct ReplayOutcome {
  std::int64_t peak_reserved_bytes = 0;
  std::int64_t peak_allocated_bytes = 0;
  std::int64_t final_reserved_bytes = 0;
  bool oom = false;
  std::int64_t oom_event_index = -1;   // trace position of the malloc that failed first
  std::int64_t oom_request_bytes = 0;  // its rounded request
  std::int64_t oom_reserved_unallocated_bytes = 0;
  std::string oom_message;  // PyTorch's text for that OOM
  std::int64_t ooms = 0;    // mallocs that failed in total
};

struct DeviceReplay {
  int device = 0;
  bool own_settings = true;  // replayed under the recorded settings: a check
  std::string alloc_conf;    // the configuration replayed
  bool expandable_segments = false;
  std::optional<std::int64_t> capacity_bytes;  // nullopt: unlimited
  // Set when the capacity comes from an OOM-retry release (cudaMalloc failed, PyTorch freed
  // its cache and retried): the device held at least this (the recorded peak reserved), and
  // capacity_bytes is the largest amount below what failed.
  std::optional<std::int64_t> capacity_lower_bound_bytes;
  // "--capacity", "recorded OOM at entry N", "OOM-retry release at entry N: ...", "unlimited"
  std::string capacity_source;
  bool rebuilt_start = false;  // the trace starts mid-run; state rebuilt (section 10.3)
  std::int64_t events = 0;     // trace entries replayed
  std::int64_t mallocs = 0;
  std::int64_t frees = 0;
  std::int64_t empty_caches = 0;     // release runs replayed as torch.cuda.empty_cache()
  std::int64_t compared_events = 0;  // own settings: recorded events checked
  std::int64_t mismatched_events = 0;
  std::optional<Divergence> divergence;  // own settings: the first mismatch
  RecordedOutcome recorded;
  ReplayOutcome replayed;
  std::vector<std::string> notes;  // approximations made (e.g. private pools skipped)
};

struct ReplayReport {
  std::vector<DeviceReplay> devices;  // devices with a trace
};

// Replays every device trace of `snapshot`. Errors: kInvalidConfig from
// alloc::ParseAllocatorConfig for a bad `alloc_conf` (or recorded settings string);
// kInvalidInput "device_traces: the snapshot has no trace to replay" when no device has a
// trace entry. Divergences are results, not errors.
// Example: ReplayOptions options; options.alloc_conf = "expandable_segments:True";
//          auto report = Replay(*snap, options);
Result<ReplayReport> Replay(const Snapshot& snapshot, const ReplayOptions& options = {});

}  // namespace memtune::snapshot
