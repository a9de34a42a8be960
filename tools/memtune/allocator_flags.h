// `memtune estimate`'s allocator forecast options (--emit-trace, --trace-rank, --iterations,
// --torch-version, --no-allocator): into assess::AssessOptions, and the trace file
// (docs/synth.md).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "memtune/alloc/config.h"
#include "memtune/assess/assess.h"

namespace memtune::cli {

struct AllocatorFlags {
  std::string emit_trace;  // --emit-trace FILE
  int trace_rank = -1;     // --trace-rank N (default: the most loaded rank)
  int iterations = 2;
  std::string torch_version;  // when given; else the job's memtune.versions.torch, else 2.9
  CLI::Option* torch_version_option = nullptr;  // set by AddAllocatorOptions
  bool no_allocator = false;
};

void AddAllocatorOptions(CLI::App& app, AllocatorFlags& flags);

// Sets the allocator part of `options` (whose estimate mode is already set) from the flags.
// Returns an exit code on error (after printing it), -1 to continue.
int ApplyAllocatorFlags(const AllocatorFlags& flags, assess::AssessOptions& options);

// Writes the synthesized trace of --trace-rank (default: the most loaded rank) to
// --emit-trace when asked. Returns an exit code on error (after printing it), -1 to continue.
int WriteTraceIfAsked(const model::Job& job, const assess::Assessment& assessment,
                      const AllocatorFlags& flags, const assess::AssessOptions& options);

}  // namespace memtune::cli
