// Validation against measured runs: the validation cases of docs/job-format.md §2 (JSON
// Lines), each predicted by the estimator and compared with its measurement.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memtune/core/result.h"
#include "memtune/estimate/estimate.h"

namespace memtune::assess {

using estimate::Mode;

// One measured run.
struct ValidationCase {
  std::string id;
  std::string source;
  std::string job_text;  // the case's "job" object, re-serialized as JSON
  // Memory: max_allocated | max_reserved | peak_active | device_used (measured_bytes).
  // Throughput: tokens_per_s_per_gpu | step_time_s | tflops_per_gpu | mfu (measured_value,
  // unit, flops_formula for the last two), predicted by the step-time model.
  std::string metric;
  std::string rank;  // max | rank0 | last
  std::int64_t measured_bytes = 0;
  std::string quality;  // high | medium | low | "" (absent)
  // measured.after_iterations, optional (a memtune extension of job-format.md section 2):
  // the number was read from a memory report printed after this many training iterations
  // (Megatron's "(after N iterations) memory"), so it is predicted as of then; 0 = absent,
  // the whole run's peak.
  int after_iterations = 0;
  double measured_value = 0;  // throughput metrics: the number in `unit`
  std::string unit;           // as the case states it (informative)
  std::string flops_formula;  // tflops_per_gpu / mfu: "causal" or "noncausal"
  std::string group;          // cases measured side by side ("" = none)

  bool IsThroughput() const { return measured_bytes == 0; }
};

// The largest measured.after_iterations (and --after-iterations) accepted.
inline constexpr int kMaxAfterIterations = 1000;

// Parses JSON Lines (blank lines and lines starting with '#' are skipped).
// Errors: kInvalidInput naming "<source_name>:<line>" and the field (id, job, measured.metric,
// measured.bytes, measured.rank, measured.after_iterations) with what is allowed; kInvalidInput
// naming `source_name` when the text holds no case at all.
Result<std::vector<ValidationCase>> ParseValidationCases(std::string_view jsonl,
                                                         std::string_view source_name);

// One mode's prediction of one case.
struct Prediction {
  Mode mode = Mode::kAccurate;
  std::optional<std::int64_t> predicted_bytes;  // memory cases; absent: unsupported or error
  std::optional<double> predicted_value;        // throughput cases, in the case's metric
  std::optional<double> error_pct;              // 100 * (predicted - measured) / measured
  std::string status;                           // "ok" | "unsupported" | "error"
  std::string reason;                           // why not predicted
  int pp_rank = -1;                             // the rank whose number was used
};

struct CaseResult {
  ValidationCase measured;
  // The memory report predicted: ValidateOptions::after_iterations, else the case's own
  // measured.after_iterations (0 = the whole run).
  int after_iterations = 0;
  Prediction accurate;
  std::vector<Prediction> compare;  // one per EstimateOptions in `compare`
};

// Error statistics of one mode over the cases it predicted.
struct ErrorSummary {
  Mode mode = Mode::kAccurate;
  int cases = 0;      // all cases
  int predicted = 0;  // cases with a prediction
  double median_abs_error_pct = 0;
  double p90_abs_error_pct = 0;  // nearest-rank 90th percentile
  double max_abs_error_pct = 0;
  double coverage = 0;  // predicted / cases
};

// Throughput cases measured side by side (one `group`): each case's throughput ratio to the
// group's first case, predicted vs measured, and whether pairs come out in the right order.
struct GroupSummary {
  std::string group;
  int cases = 0;
  int predicted = 0;
  int pairs = 0;        // pairs of predicted cases whose measurements differ by >= 1%
  int pairs_right = 0;  // ... that the prediction orders the same way
  std::vector<std::pair<std::string, double>> ratio_error_pct;  // (case id, error), not the first
};

struct ThroughputSummary {
  int cases = 0;
  int predicted = 0;
  double median_abs_error_pct = 0;  // absolute: predicted vs measured value
  double p90_abs_error_pct = 0;
  double max_abs_error_pct = 0;
  double median_abs_ratio_error_pct = 0;  // over every group's non-first cases
  int pairs = 0;
  int pairs_right = 0;
  std::vector<GroupSummary> groups;  // in order of first appearance
};

struct ValidationReport {
  std::vector<CaseResult> cases;
  ErrorSummary summary;               // accurate mode, memory cases
  std::vector<ErrorSummary> compare;  // per compared mode, memory cases
  ThroughputSummary throughput;       // throughput cases (accurate mode)
};

struct ValidateOptions {
  std::vector<Mode> compare;  // compatibility modes to run side by side
  // Predict this rank ("max", "rank0", "last") instead of each case's measured.rank
  // (for diagnosing which stage a published number came from); "" = the case's rank.
  std::string rank_override;
  // Predict each metric as of a memory report printed after this many training iterations
  // (Megatron-LM's and Bridge's "(after N iterations) memory": PyTorch's peaks since start-up
  // through iteration N's optimizer step) instead of over the whole run, for every case;
  // 0 = each case's own measured.after_iterations (absent: the whole run).
  // Accurate mode only (max_allocated then comes from the trace too); the compatibility
  // modes keep upstream's formula.
  int after_iterations = 0;
};

// Predicts every case: parses its job (model::ParseJobText), estimates it, and reads the
// metric for the case's rank (max: the most loaded stage; rank0: stage 0; last: the last
// stage). max_allocated is the estimate's; max_reserved, device_used and peak_active come
// from replaying each rank's synthesized trace through the allocator simulator under the
// job's allocator config (accurate mode only; the compatibility modes call them
// "unsupported"). A job that does not parse or estimate is status "error" or "unsupported"
// with the reason. Throughput cases are predicted by steptime::PredictStepTime in the
// case's metric (accurate mode only) and summarised in `throughput`, per group too.
// Never fails as a whole.
// Example: Validate(*ParseValidationCases(text, "cases.jsonl"), {}).summary.median_abs_error_pct.
ValidationReport Validate(const std::vector<ValidationCase>& cases, const ValidateOptions& options);

}  // namespace memtune::assess
