// Forecast: replay each pipeline rank's synthesized trace through the caching-allocator
// simulator, under the job's own PYTORCH_CUDA_ALLOC_CONF and under the other segment mode
// (native <-> expandable), to predict peak reserved memory and whether the job runs out of
// memory, before anyone launches it. The verdict is the simulated allocator's, never a
// fragmentation percentage. docs/synth.md.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "memtune/alloc/config.h"
#include "memtune/core/result.h"
#include "memtune/model/job.h"
#include "memtune/nonpytorch/non_pytorch.h"
#include "memtune/synth/synthesize.h"

namespace memtune::synth {

// One allocator configuration's replay of one rank's trace.
struct AllocatorRun {
  std::string alloc_conf;  // the PYTORCH_CUDA_ALLOC_CONF simulated ("" = defaults)
  bool expandable_segments = false;
  std::int64_t peak_allocated_bytes = 0;  // up to the OOM when oom
  std::int64_t peak_reserved_bytes = 0;
  // ForecastJob: the peak reserved of the same replay without a capacity limit (what the
  // rank needs under this config); equals peak_reserved_bytes when the run did not OOM.
  std::int64_t unlimited_peak_reserved_bytes = 0;
  std::int64_t unallocated_at_peak_bytes = 0;  // reserved - allocated when reserved peaked
  std::int64_t peak_active_bytes = 0;          // allocated + blocks awaiting a stream's use
                                               // (PyTorch active_bytes.all.peak); up to the OOM
  std::string peak_event;                      // label of the allocation that set the reserved peak
  bool oom = false;
  std::string oom_event;    // label and size of the allocation that failed
  std::string oom_message;  // the text PyTorch (or NCCL, for its buffers) would raise
  // The memory outside PyTorch that failed to fit when it appeared ("" when the failing
  // allocation was PyTorch's), e.g. "nccl.tp": NCCL cannot use PyTorch's cached blocks.
  std::string oom_outside_part;
  // When oom: how many more bytes the failing cudaMalloc needed than the device had free
  // after the cache was released (Tried to allocate - free): the least memory the rank is
  // short by at that moment. 0 otherwise.
  std::int64_t oom_shortfall_bytes = 0;
  // Peaks from start-up through the end of each training iteration, its optimizer step
  // included: [i] covers iterations 0..i. These are the numbers Megatron-LM's and
  // Megatron-Bridge's "(after N iterations) memory" report prints for N = i + 1
  // (allocated_bytes.all.peak, reserved_bytes.all.peak, active_bytes.all.peak: PyTorch's
  // peak counters are never reset). After iteration 1 Adam's moments exist only from the
  // step on, so [0] is below the steady state. Cut at the OOM when oom; the last element
  // equals the peak_*_bytes above.
  std::vector<std::int64_t> peak_allocated_through_iteration_bytes;
  std::vector<std::int64_t> peak_reserved_through_iteration_bytes;
  std::vector<std::int64_t> peak_active_through_iteration_bytes;
};

struct StageForecast {
  int pp_rank = 0;
  std::int64_t non_pytorch_bytes = 0;     // the rank's memory outside PyTorch, once all appeared
  std::int64_t peak_allocated_bytes = 0;  // the trace's peak (no capacity limit)
  std::string peak_allocated_event;
  // The trace's allocated peak through the end of iteration i ([i]; see AllocatorRun), from
  // the same replay as peak_allocated_bytes.
  std::vector<std::int64_t> peak_allocated_through_iteration_bytes;
  std::int64_t persistent_bytes = 0;  // live after the last iteration (model state)
  std::int64_t events = 0;
  AllocatorRun own;    // the job's allocator config
  AllocatorRun other;  // the other segment mode
};

struct Forecast {
  std::vector<StageForecast> stages;  // one per pipeline rank
  int peak_pp_rank = 0;               // the stage with the highest trace peak allocated
  int iterations = 2;
  std::int64_t capacity_bytes = 0;  // GPU total (0 = unknown: no verdict)
  alloc::TorchVersion torch_version = alloc::kDefaultTorchVersion;
  // The job field the allocator config came from ("memtune.env.PYTORCH_CUDA_ALLOC_CONF",
  // "alloc_conf" for ForecastOptions::alloc_conf; "" when unset: PyTorch's defaults).
  std::string alloc_conf_field;
  bool own_oom = false;    // some stage OOMs under the job's config
  bool other_oom = false;  // some stage OOMs under the other mode
};

struct ForecastOptions {
  SynthOptions synth;
  std::int64_t capacity_bytes = 0;  // 0: unknown GPU, simulate without a limit
  // Memory outside PyTorch per pipeline rank ([r]; a missing rank has none). Each part takes
  // device memory from its moment on (nonpytorch::Moment); ignored without a capacity.
  std::vector<nonpytorch::NonPytorchMemory> non_pytorch;
  alloc::TorchVersion torch_version = alloc::kDefaultTorchVersion;
  std::optional<std::string> alloc_conf;  // default: the job's memtune.env, read as PyTorch
                                          // options.torch_version reads it
};

// The allocator config the job runs with, and the job field it came from.
struct JobAllocator {
  alloc::AllocatorConfig config;
  std::string field;  // see Forecast::alloc_conf_field
};

// options.alloc_conf parsed for options.torch_version, else the job's launch environment
// (memtune.env) read as PyTorch reads it (alloc::AllocatorConfigFromEnv).
// Errors: kInvalidConfig naming the field it came from (PyTorch's message).
Result<JobAllocator> JobAllocatorConfig(const model::Job& job, const ForecastOptions& options);

// Replays rank `pp_rank` under `config` on a device of `capacity_bytes` (0 = no limit) from
// which `outside` takes memory as its parts appear.
AllocatorRun SimulateRank(const TraceSynthesizer& synth, int pp_rank,
                          const alloc::AllocatorConfig& config, std::int64_t capacity_bytes,
                          const nonpytorch::NonPytorchMemory& outside);

// Called after each event of SimulateRank's replay that the allocator carried out (the
// allocation that runs out of memory is not), with the event's 0-based index in the trace
// and the simulator's state then. Return false to stop the replay there.
using ReplayObserver = std::function<bool(std::int64_t event_index, const SynthEvent& event,
                                          const alloc::Simulator& sim)>;

// SimulateRank, calling `observer` after every event (timelines, a snapshot of the segments
// at a chosen moment: report/html_report.h).
AllocatorRun SimulateRankObserved(const TraceSynthesizer& synth, int pp_rank,
                                  const alloc::AllocatorConfig& config, std::int64_t capacity_bytes,
                                  const nonpytorch::NonPytorchMemory& outside,
                                  const ReplayObserver& observer);

// The smallest device capacity (bytes, non-PyTorch memory included) at which rank
// `pp_rank` runs without an OOM under `config`, found by bisection between `oom_bytes` (a
// capacity that runs out) and `fits_bytes` (one that does not, e.g. the unlimited replay's
// peak reserved + non-PyTorch memory) to within `resolution_bytes`; returns the fitting end.
// The native allocator frees its cache and retries before it gives up, so it fits in less
// than its unlimited peak reserved.
std::int64_t SmallestFittingCapacity(const TraceSynthesizer& synth, int pp_rank,
                                     const alloc::AllocatorConfig& config,
                                     const nonpytorch::NonPytorchMemory& outside,
                                     std::int64_t oom_bytes, std::int64_t fits_bytes,
                                     std::int64_t resolution_bytes);

// Synthesizes and replays every rank under both modes.
// Errors: those of TraceSynthesizer::Create; kInvalidConfig naming
// memtune.env.PYTORCH_CUDA_ALLOC_CONF when the config does not parse (PyTorch's message).
// Example: ForecastJob(job, {.capacity_bytes = 80 * kGiB})->own_oom.
Result<Forecast> ForecastJob(const model::Job& job, const ForecastOptions& options);

}  // namespace memtune::synth
