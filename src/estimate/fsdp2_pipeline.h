// One pipeline stage of a torchtitan FSDP2 job (private; used by EstimateFsdp2).
#pragma once

#include <vector>

#include "memtune/estimate/estimate.h"
#include "tensors/fsdp2_tensors.h"

namespace memtune::estimate::internal {

// A pipeline rank's peak over its schedule (Fsdp2Facts::RankOrder), `stages` its local
// stages in order: every backward of the step with the cached micro-batches of all local
// stages, the first backward's gradient accumulators, each stage's reduce after its last
// backward and the optimizer steps. Fills components, peak_phase, the two peaks, layers and
// in_flight_microbatches; the caller sums the kinds.
RankEstimate EstimateFsdp2Rank(const std::vector<tensors::Fsdp2Facts>& stages, bool explain);

}  // namespace memtune::estimate::internal
