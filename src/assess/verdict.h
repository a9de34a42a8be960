// Per-mode verdicts from a forecast (private to assess).
#pragma once

#include <vector>

#include "memtune/assess/assess.h"

namespace memtune::assess::internal {

// The job's own mode first, then the other; empty when the capacity is unknown.
std::vector<ModeVerdict> DecideVerdicts(const synth::Forecast& forecast,
                                        double reserved_uncertainty);

}  // namespace memtune::assess::internal
