// Rendering of `memtune simulate` results: text, JSON (schema memtune.simulate/1) and the
// CSV timeline. Pure functions of plain structs; nothing here prints.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "memtune/alloc/config.h"
#include "memtune/alloc/replay.h"

namespace memtune::report {

// One simulated configuration and what it did.
struct SimulateRun {
  alloc::AllocatorConfig config;
  alloc::ReplaySummary summary;
};

struct SimulateReport {
  std::string trace;  // as named on the command line
  alloc::TorchVersion torch_version;
  std::int64_t capacity_bytes = 0;
  std::int64_t non_pytorch_bytes = 0;
  std::vector<SimulateRun> runs;  // the --alloc-conf run, then the --compare run if any
};

// A human-readable table, one column per run, then the first OOM of each run with
// PyTorch's message, notes and options that were not simulated. Ends with a newline.
std::string RenderSimulateText(const SimulateReport& report);

// JSON object with "schema": "memtune.simulate/1". The first run's figures are top-level
// fields (peak_allocated_bytes, peak_reserved_bytes, ooms, first_oom, ...); a --compare run
// is the same object under "compare" (null otherwise). Ends with a newline.
std::string RenderSimulateJson(const SimulateReport& report);

// CSV timeline: a header row, then one row per trace event with the counters of each run
// (columns prefixed "compare_" for the second run).
void WriteTimelineCsvHeader(std::ostream& out, std::size_t runs);
void WriteTimelineCsvRow(std::ostream& out, std::int64_t event_index,
                         const alloc::TraceEvent& event,
                         const std::vector<alloc::TimelineSample>& samples);

}  // namespace memtune::report
