// Renderers of the estimator's and the validator's reports: text for people, JSON for
// tools (schemas memtune.estimate/1 and memtune.validate/1, docs/estimator.md).
// Pure functions of plain structs; they never print.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "memtune/assess/assess.h"
#include "memtune/assess/validate.h"

namespace memtune::report {

// What the estimate report says besides the estimate itself.
struct EstimateReportContext {
  std::string job_name;                    // as the user named the job file
  std::string gpu_name;                    // catalog name, or "" when unknown
  std::vector<std::string> defaults_used;  // model::JobDocument::defaults_used
  std::string precision;                   // model::DescribePrecision ("" = not shown)
  std::string parameters;                  // model::DescribeParameters ("" = not shown)
};

// Per-stage component table (rows: components, columns: pipeline ranks; decimal GB),
// the most loaded rank, fits-or-not against the GPU capacity less the CUDA context, the
// allocator forecast with the verdict per mode and the advice (when simulated), defaults
// assumed, assumptions and (compatibility modes) what upstream prints.
std::string RenderEstimateText(const assess::Assessment& assessment,
                               const EstimateReportContext& context);

// JSON "memtune.estimate/1": mode, ranks[] {pp_rank, layers, in_flight_microbatches,
// peak_phase, allocated_bytes, model_state_bytes, activation_bytes, transient_bytes,
// components {name: bytes}, component_details[]}, peak {pp_rank, allocated_bytes}, gpu
// {name, capacity_bytes, non_pytorch_bytes, usable_bytes, fits, headroom_bytes}, verdict
// {native|expandable: {state: fits|at_risk|oom, margin_bytes, pp_rank, moment,
// uncertainty_bytes, alloc_conf, job_config}} ({} without a forecast), advice[] {id, playbook_step,
// changes {field: value}, effect_bytes, text}, allocator {...} (when simulated),
// defaults_used[], assumptions[], upstream_lines[]. Two-space indented, newline-terminated.
std::string RenderEstimateJson(const assess::Assessment& assessment,
                               const EstimateReportContext& context);

// Case table (id, metric, rank, measured, predicted, error % and the compared modes side
// by side), the reasons of unpredicted cases, and the error summary per mode.
std::string RenderValidateText(const assess::ValidationReport& report);

// JSON "memtune.validate/1": cases[] {id, metric, rank, measured_bytes, predicted_bytes
// (null when not predicted), error_pct (null), status, reason, pp_rank, compare {mode:
// {...}}}, summary {cases, predicted, coverage, median_abs_error_pct, p90_abs_error_pct,
// max_abs_error_pct}, compare_summary {mode: {...}}.
std::string RenderValidateJson(const assess::ValidationReport& report);

}  // namespace memtune::report
