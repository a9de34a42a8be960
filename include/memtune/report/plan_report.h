// Renderers of a plan (plan/plan.h): text for people, JSON for tools (schema
// memtune.plan/1, docs/plan.md). Pure functions of the plan; they never print.
#pragma once

#include <string>

#include "memtune/plan/plan.h"

namespace memtune::report {

// The current job's prediction and verdicts, the search counts, then one entry per
// candidate: rank, throughput change, tokens/s/GPU, step time, verdict per allocator mode
// (the mode it is ranked under marked *), its field changes and the reason for its cost.
std::string RenderPlanText(const plan::Plan& plan, const std::string& job_name);

// {"schema", "gpus", "current", "candidates"[{"rank", "changes"[{"field","value"}],
//  "verdict"{mode: {"state","margin_bytes"}}, "mode", "predicted"{"step_time_s",
//  "tokens_per_s_per_gpu", "tflops_per_gpu_causal", "mfu_causal"}, "relative_throughput",
//  "change_pct", "reason"}], "search"{...}, "nothing_fits"}.
std::string RenderPlanJson(const plan::Plan& plan);

}  // namespace memtune::report
