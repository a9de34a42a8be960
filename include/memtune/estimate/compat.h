// Byte-exact reproductions of the two NVIDIA estimators (docs/estimator.md, megatron.md §1-§3).
#pragma once

#include "memtune/estimate/estimate.h"

namespace memtune::estimate {

// Megatron-LM megatron/training/theoretical_memory_usage.py report_theoretical_memory:
// weight+optimizer and activation (SP+selective formula, or the without_sp formula as
// upstream chooses), for the most-loaded shard. peak_allocated_bytes = upstream total.
Result<Estimate> EstimateMegatronLm(const model::Job& job, const EstimateOptions& options);

// Megatron-Bridge theoretical_memory_utils.estimate_training_memory: dense and routed
// model-state components and the activation term. peak_allocated_bytes = upstream total.
Result<Estimate> EstimateBridge(const model::Job& job, const EstimateOptions& options);

}  // namespace memtune::estimate
