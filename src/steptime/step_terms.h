// The step-level terms around the layers' compute: the pipeline bubble and send/recv, the
// data-parallel gradient and parameter traffic (DDP, distributed optimizer, Megatron-FSDP,
// FSDP2), the optimizer step, and CPU offload (docs/step-time.md, "One step").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "memtune/estimate/schedule.h"
#include "memtune/steptime/step_time.h"
#include "steptime/layer_time.h"

namespace memtune::steptime {

// Per micro-batch work of one pipeline rank.
struct RankWork {
  PassTime forward, backward, recompute;
  double forward_wall = 0, backward_wall = 0;  // with the host bound per layer
  double Wall() const { return forward_wall + backward_wall; }
};

// Adds `seconds` (when positive) as a term of `out` and to its step time.
void AddTerm(StepTime& out, std::string_view name, double seconds, std::string detail);

// Bubble of the job's schedule and the exposed pipeline send/recv.
void AddPipelineTerms(const LayerContext& ctx, const std::vector<RankWork>& work, double mean_wall,
                      double microbatches, StepTime& out);

// Gradient reduction, parameter all-gather, optimizer step and offload of the critical
// stage, given its per-micro-batch forward and backward wall times.
void AddDataParallelTerms(const LayerContext& ctx, const estimate::StageLayout& stage,
                          double forward_wall, double backward_wall, double microbatches,
                          StepTime& out);

}  // namespace memtune::steptime
