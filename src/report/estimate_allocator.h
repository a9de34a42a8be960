// The allocator forecast's part of the estimate reports (private to report/).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "memtune/estimate/estimate.h"
#include "memtune/synth/forecast.h"

namespace memtune::report::internal {

// "allocator (simulated ...)" section: per-stage trace peak allocated, reserved under both
// modes, unallocated at the reserved peak; the verdicts with PyTorch's message; the advice
// (expandable segments first when native OOMs and expandable fits).
void AppendForecastText(std::string& out, const estimate::Estimate& e, const synth::Forecast& f);

// Adds peak.reserved_bytes, peak.oom, peak.trace_allocated_bytes, peak.alternative_allocator
// and the "allocator" object to an estimate JSON document.
void AddForecastJson(nlohmann::ordered_json& j, const estimate::Estimate& e, const synth::Forecast& f);

}  // namespace memtune::report::internal
