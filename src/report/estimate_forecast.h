// The allocator forecast's part of the estimate reports (private to report/).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "memtune/assess/assess.h"

namespace memtune::report::internal {

// "allocator (simulated ...)" section: per-stage trace peak allocated, reserved under both
// modes, unallocated at the reserved peak; the assessment's verdict per mode with PyTorch's
// message; its advice.
void AppendForecastText(std::string& out, const assess::Assessment& a, const synth::Forecast& f);

// Adds peak.reserved_bytes, peak.oom, peak.trace_allocated_bytes, peak.alternative_allocator
// and the "allocator" object to an estimate JSON document.
void AddForecastJson(nlohmann::ordered_json& j, const synth::Forecast& f);

// The "verdict" object (keyed by allocator mode; {} without verdicts) and the "advice" list.
nlohmann::ordered_json VerdictJson(const assess::Assessment& a);
nlohmann::ordered_json AdviceJson(const assess::Assessment& a);

}  // namespace memtune::report::internal
