// Replaying a trace (trace.h) through one or more Simulators in lockstep, collecting the
// figures `memtune simulate` reports: peaks, fragmentation at the peak, device calls,
// retries and the first OOM.
//
// After an OOM the trace goes on, as a training script that catches the error would: the
// failing tensor is never created, and a later `free` of its handle is ignored with a note
// (see docs/trace-format.md, "After an OOM").
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/alloc/simulator.h"
#include "memtune/alloc/stats.h"
#include "memtune/alloc/trace.h"
#include "memtune/core/result.h"

namespace memtune::alloc {

// The first OOM of one simulator.
struct FirstOom {
  std::int64_t event_index = 0;  // 0-based index of the trace event
  std::int64_t line = 0;         // line in the trace
  std::string handle;
  std::string label;
  std::int64_t requested_bytes = 0;
  std::string message;  // PyTorch's text for the configured version
  OomReport report;
};

// Figures of one simulator over the whole trace. Bytes throughout.
struct ReplaySummary {
  std::int64_t events = 0;
  std::int64_t peak_allocated_bytes = 0;  // max_memory_allocated()
  std::int64_t peak_reserved_bytes = 0;   // max_memory_reserved()
  std::int64_t peak_active_bytes = 0;
  std::int64_t peak_requested_bytes = 0;
  // At the end of the event that last raised the reserved peak.
  std::int64_t peak_reserved_event_index = -1;
  std::int64_t allocated_at_peak_reserved_bytes = 0;
  std::int64_t reserved_unallocated_at_peak_bytes = 0;  // peak reserved - allocated then
  std::int64_t final_allocated_bytes = 0;
  std::int64_t final_reserved_bytes = 0;
  std::int64_t ooms = 0;  // num_ooms plus >= 1 EB requests
  std::optional<FirstOom> first_oom;
  std::vector<std::string> notes;  // first notes (e.g. frees of failed handles)
  std::int64_t notes_dropped = 0;  // notes beyond the kept ones
  DeviceStats stats;               // final memory_stats()
};

// The counters after one event, for timelines.
struct TimelineSample {
  std::int64_t allocated_bytes = 0;
  std::int64_t reserved_bytes = 0;
  std::int64_t active_bytes = 0;
  std::int64_t requested_bytes = 0;
  std::int64_t segments = 0;
  std::int64_t ooms = 0;
};

// Called after every event with one sample per simulator (same order as the options).
using TimelineCallback = std::function<void(std::int64_t event_index, const TraceEvent& event,
                                            const std::vector<TimelineSample>&)>;

struct ReplayOptions {
  std::vector<SimulatorOptions> simulators;  // one or more configurations, run side by side
  TimelineCallback on_event;                 // optional
  std::size_t max_notes = 20;
};

// Reads `in` to the end and replays it through every configured simulator.
// Errors: the reader's kInvalidInput errors, and kInvalidInput with field "<source>:<line>"
// for trace misuse: allocating a live handle, freeing an unknown or already freed handle
// ("double free"), record_stream or free_completed on a handle that does not allow it.
// Example: std::ifstream f("step.trace"); auto r = ReplayTrace(f, "step.trace", {{options}});
Result<std::vector<ReplaySummary>> ReplayTrace(std::istream& in, std::string_view source_name,
                                               const ReplayOptions& options);

}  // namespace memtune::alloc
