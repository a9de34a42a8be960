// Per-mode verdicts from a forecast (private to assess).
#pragma once

#include <vector>

#include "memtune/assess/assess.h"

namespace memtune::assess::internal {

// The job's own mode first, then the other; empty when the capacity is unknown.
// `non_pytorch` holds each forecast stage's memory outside PyTorch ([pp_rank]).
std::vector<ModeVerdict> DecideVerdicts(
    const synth::Forecast& forecast, const std::vector<nonpytorch::NonPytorchMemory>& non_pytorch,
    double reserved_uncertainty);

}  // namespace memtune::assess::internal
