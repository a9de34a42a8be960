// One pipeline stage of a torchtitan FSDP2 job (private; used by EstimateFsdp2).
#pragma once

#include "memtune/estimate/estimate.h"
#include "tensors/fsdp2_tensors.h"

namespace memtune::estimate::internal {

// The stage's peak over its schedule (Fsdp2Facts::ScheduleOrder): every backward of the
// step with the other micro-batches in flight, the first backward's gradient
// accumulators, the reduce at the end and the optimizer step. Fills components,
// peak_phase, the two peaks, layers and in_flight_microbatches; the caller sums the kinds.
RankEstimate EstimateFsdp2Stage(const tensors::Fsdp2Facts& f, bool explain);

}  // namespace memtune::estimate::internal
