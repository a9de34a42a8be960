// The accurate estimate of a torchtitan FSDP2 job (private; EstimateMemory dispatches here
// for memtune.framework: fsdp2). See docs/estimator.md "FSDP2".
#pragma once

#include "memtune/estimate/estimate.h"

namespace memtune::estimate::internal {

// One rank class (pp_rank 0), or one per pipeline rank with pipeline parallelism
// (fsdp2_pipeline.h): model state, activations and transients at the highest of the heaviest
// block forward, the loss backward, the block backwards and reduce-scatters and the
// optimizer step. Errors: those of MakeFsdp2Facts (kUnsupported for MoE, MLA, compile
// without AC, the pipeline schedules it does not model; kInvalidConfig for layouts
// torchtitan or PyTorch refuse).
Result<Estimate> EstimateFsdp2(const model::Job& job, const EstimateOptions& options);

}  // namespace memtune::estimate::internal
