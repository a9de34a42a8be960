// Throughput validation cases (docs/job-format.md section 2): parsing the measurement,
// predicting it with the step-time model, and the per-group ratio / order summary.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "memtune/assess/validate.h"
#include "memtune/model/job.h"

namespace memtune::assess::internal {

// tokens_per_s_per_gpu, step_time_s, tflops_per_gpu, mfu.
bool IsThroughputMetric(const std::string& metric);

// Reads measured.value (> 0; mfu at most 1), measured.unit and measured.flops_formula
// (required for tflops_per_gpu and mfu) into `c`.
// Errors: kInvalidInput naming `where` and the field with what is allowed.
Status ParseThroughputMeasurement(const nlohmann::json& measured, const std::string& where,
                                  ValidationCase& c);

// The case's metric from steptime::PredictStepTime (accurate mode; the compatibility modes
// have no step time and say "unsupported").
Prediction PredictThroughput(const ValidationCase& c, const model::Job& job, Mode mode);

ThroughputSummary SummarizeThroughput(const std::vector<CaseResult>& cases);

}  // namespace memtune::assess::internal
