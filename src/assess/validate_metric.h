// The allocator metrics of a validation case (private to assess).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "memtune/core/result.h"
#include "memtune/estimate/estimate.h"
#include "memtune/model/job.h"

namespace memtune::assess::internal {

// The synthesized iterations repeat from the second on (the same events: Adam's state
// exists, nothing else changes), so the allocator settles within a few of them: a report
// after N > kMaxReplayedIterations iterations reads the last replayed one's peaks. This
// keeps a large N (the case format allows 1000) from replaying thousands of iterations.
inline constexpr int kMaxReplayedIterations = 4;

// max_reserved / device_used / peak_active of the accurate mode, and every metric as of a
// memory report after N iterations: replays every rank's synthesized trace once under the
// job's allocator config (docs/synth.md), with the rank's memory outside PyTorch taking
// device memory as it appears (docs/non-pytorch.md). device_used (nvidia-smi's per-process
// figure) adds that memory, once all of it appeared, to reserved, less the driver's
// framebuffer reserve, which no process holds; peak_active is the replay's
// active_bytes.all.peak (allocated plus blocks still awaiting another stream); max_allocated
// replays without a capacity (the trace's allocated peak does not depend on the allocator).
// after_iterations > 0 reads the peaks through that iteration. `rank` is "max" (the stage with the
// highest value), "rank0" or "last". Returns the pipeline rank used and the bytes. Errors: those of
// synth::TraceSynthesizer::Create, synth::JobAllocatorConfig and OutsideMemory (assess/outside.h).
Result<std::pair<int, std::int64_t>> AllocatorMetric(const model::Job& job,
                                                     const estimate::Estimate& e,
                                                     const std::string& metric,
                                                     const std::string& rank, int after_iterations);

}  // namespace memtune::assess::internal
