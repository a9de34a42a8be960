// One-line explanations of a plan candidate: what it changes and what it costs or gains,
// from the step-time terms that move most (docs/plan.md, "Reasons").
#pragma once

#include <string>
#include <vector>

#include "memtune/plan/plan.h"

namespace memtune::plan {

// "TP 4->8, DP 2->1, expandable segments" (the levers a change list touches).
std::string DescribeChanges(const std::vector<assess::FieldChange>& changes);

// "TP 4->8, DP 2->1: exposed TP/CP/EP comm +0.18 s, GEMMs +0.15 s per step".
std::string CostReason(const Candidate& current, const Candidate& candidate);

}  // namespace memtune::plan
