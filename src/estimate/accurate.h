// memtune's accurate per-rank estimate (private; the public entry is EstimateMemory).
#pragma once

#include "memtune/estimate/estimate.h"

namespace memtune::estimate::internal {

// Per-rank model state + activations held at the rank's schedule peak + the transient
// live then, or the optimizer-step peak when that is higher. See docs/estimator.md.
// framework fsdp2 goes to EstimateFsdp2 (fsdp2_estimate.h).
// Errors: kUnsupported for what the model does not cover;
// kInvalidConfig for an inconsistent pipeline layout; kNotFound for an unknown GPU.
Result<Estimate> EstimateAccurate(const model::Job& job, const EstimateOptions& options);

// Fills gpu_capacity_bytes from memtune.gpu / gpu_memory_bytes when
// the estimate has none (the compatibility modes). Errors: kNotFound for an unknown GPU.
Status FillGpuFacts(const model::Job& job, Estimate& estimate);

}  // namespace memtune::estimate::internal
