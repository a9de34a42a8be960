// `memtune estimate`'s allocator forecast options (--emit-trace, --trace-rank, --iterations,
// --torch-version, --no-allocator) and running the forecast (docs/synth.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "memtune/alloc/config.h"
#include "memtune/estimate/estimate.h"
#include "memtune/report/estimate_report.h"

namespace memtune::cli {

struct AllocatorFlags {
  std::string emit_trace;  // --emit-trace FILE
  int trace_rank = -1;     // --trace-rank N (default: the most loaded rank)
  int iterations = 2;
  std::string torch_version = alloc::kDefaultTorchVersion.ToString();
  bool no_allocator = false;
};

void AddAllocatorOptions(CLI::App& app, AllocatorFlags& flags);

// Accurate mode: synthesizes and simulates every rank into `ctx.forecast` (or explains in
// `ctx.forecast_note` why not), and writes the trace when asked. Returns an exit code on
// error (after printing it), -1 to continue.
int RunAllocatorForecast(const model::Job& job, const estimate::Estimate& e, estimate::Mode mode,
                         const AllocatorFlags& flags, std::optional<std::int64_t> microbatches,
                         report::EstimateReportContext& ctx);

}  // namespace memtune::cli
