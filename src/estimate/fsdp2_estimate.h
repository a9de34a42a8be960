// The accurate estimate of a torchtitan FSDP2 job (private; EstimateMemory dispatches here
// for memtune.framework: fsdp2). See docs/estimator.md "FSDP2".
#pragma once

#include "memtune/estimate/estimate.h"

namespace memtune::estimate::internal {

// One rank class (pp_rank 0): model state, activations and transients at the highest of
// the loss backward, the last block's backward and the optimizer step.
// Errors: those of MakeFsdp2Facts (kUnsupported for PP, CP, MoE, MLA, compile without AC).
Result<Estimate> EstimateFsdp2(const model::Job& job, const EstimateOptions& options);

}  // namespace memtune::estimate::internal
