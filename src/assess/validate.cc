// Validation cases: parsing the JSON Lines, predicting each case, error statistics.
#include "memtune/assess/validate.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "assess/error_stats.h"
#include "assess/validate_metric.h"
#include "assess/validate_throughput.h"
#include "memtune/core/units.h"
#include "memtune/model/job_parse.h"
#include "memtune/model/strict_json.h"

namespace memtune::assess {
namespace {

using estimate::EstimateOptions;
using estimate::RankEstimate;

using nlohmann::json;

Result<ValidationCase> ParseCase(const json& j, const std::string& where) {
  auto bad = [&](const std::string& field, const std::string& what) {
    return InvalidInput(where, field + " " + what);
  };
  if (!j.is_object()) return bad("case", "must be a JSON object");
  ValidationCase c;
  if (!j.contains("id") || !j["id"].is_string()) return bad("id", "must be a string");
  c.id = j["id"].get<std::string>();
  if (j.contains("source") && j["source"].is_string()) c.source = j["source"].get<std::string>();
  if (j.contains("quality") && j["quality"].is_string())
    c.quality = j["quality"].get<std::string>();
  if (!j.contains("job") || !j["job"].is_object())
    return bad("job", "must be a job document object");
  // Replaced, not thrown on: invalid UTF-8 in the job then fails the job parser with a position.
  c.job_text = j["job"].dump(-1, ' ', false, json::error_handler_t::replace);
  if (!j.contains("measured") || !j["measured"].is_object())
    return bad("measured", "must be an object");
  const json& m = j["measured"];
  static const char* kMetrics[] = {
      "max_allocated",        "max_reserved", "peak_active",    "device_used",
      "tokens_per_s_per_gpu", "step_time_s",  "tflops_per_gpu", "mfu"};
  if (!m.contains("metric") || !m["metric"].is_string() ||
      std::none_of(std::begin(kMetrics), std::end(kMetrics),
                   [&](const char* k) { return m["metric"].get<std::string>() == k; })) {
    return bad("measured.metric",
               "must be one of max_allocated, max_reserved, peak_active, device_used, "
               "tokens_per_s_per_gpu, step_time_s, tflops_per_gpu, mfu");
  }
  if (j.contains("group") && j["group"].is_string()) c.group = j["group"].get<std::string>();
  if (internal::IsThroughputMetric(m["metric"].get<std::string>())) {
    c.metric = m["metric"].get<std::string>();
    MEMTUNE_RETURN_IF_ERROR(internal::ParseThroughputMeasurement(m, where, c));
    return c;
  }
  c.metric = m["metric"].get<std::string>();
  // At most 1 PiB, the largest GPU memory a job may declare: a larger number is a typo, and
  // one beyond 2^63 would not even convert to int64 (it read as -9.2e18 bytes).
  constexpr double kMaxMeasuredBytes = static_cast<double>(kMaxDeviceBytes);
  const json* bytes = m.contains("bytes") ? &m["bytes"] : nullptr;
  if (bytes == nullptr || !bytes->is_number() || !(bytes->get<double>() >= 1) ||
      bytes->get<double>() > kMaxMeasuredBytes) {
    return bad("measured.bytes",
               "must be a number of bytes from 1 to " + FormatWithCommas(kMaxDeviceBytes) +
                   " (got " +
                   (bytes == nullptr ? std::string("nothing") : model::JsonEcho(*bytes)) + ")");
  }
  c.measured_bytes = static_cast<std::int64_t>(std::llround(bytes->get<double>()));
  if (m.contains("rank") && !m["rank"].is_string()) {
    return bad("measured.rank",
               "must be one of max, rank0, last (got " + model::JsonEcho(m["rank"]) + ")");
  }
  c.rank = m.value("rank", std::string("max"));
  if (c.rank != "max" && c.rank != "rank0" && c.rank != "last") {
    return bad("measured.rank", "must be one of max, rank0, last (got '" + c.rank + "')");
  }
  if (m.contains("after_iterations")) {
    const json& a = m["after_iterations"];
    if (!a.is_number_integer() || a.get<std::int64_t>() < 1 ||
        a.get<std::int64_t>() > kMaxAfterIterations) {
      return bad("measured.after_iterations", "must be a whole number of iterations from 1 to " +
                                                  std::to_string(kMaxAfterIterations) + " (got " +
                                                  model::JsonEcho(a) + ")");
    }
    c.after_iterations = a.get<int>();
  }
  return c;
}

// `after`: CaseResult::after_iterations.
Prediction Predict(const ValidationCase& c, const model::Job& job, Mode mode,
                   const std::string& rank, int after) {
  Prediction p;
  p.mode = mode;
  // Every metric but max_allocated (ParseValidationCase admits four) comes from the replay;
  // max_allocated too when it is read after a given iteration (the estimate is the whole run's).
  const bool allocator_metric =
      c.metric != "max_allocated" || (after > 0 && mode == Mode::kAccurate);
  if (allocator_metric && mode != Mode::kAccurate) {
    p.status = "unsupported";
    p.reason =
        "metric " + c.metric +
        (c.metric == "max_allocated" ? " after " + std::to_string(after) + " iterations" : "") +
        " needs the allocator simulator (accurate mode only)";
    return p;
  }
  EstimateOptions options;
  options.mode = mode;
  auto estimate = estimate::EstimateMemory(job, options);
  if (!estimate) {
    p.status = estimate.error().code == ErrorCode::kUnsupported ? "unsupported" : "error";
    p.reason = estimate.error().Describe();
    return p;
  }
  std::int64_t bytes = estimate->peak_allocated_bytes;
  p.pp_rank = estimate->peak_pp_rank;
  if (allocator_metric) {  // the simulated allocator's memory (synth replay)
    auto predicted = internal::AllocatorMetric(job, *estimate, c.metric, rank, after);
    if (!predicted) {
      p.status = predicted.error().code == ErrorCode::kUnsupported ? "unsupported" : "error";
      p.reason = predicted.error().Describe();
      return p;
    }
    p.pp_rank = predicted->first;
    p.predicted_bytes = predicted->second;
    p.error_pct = 100.0 * static_cast<double>(predicted->second - c.measured_bytes) /
                  static_cast<double>(c.measured_bytes);
    p.status = "ok";
    return p;
  }
  // The compatibility modes report one (most loaded) shard only.
  if (mode == Mode::kAccurate && rank != "max" && !estimate->ranks.empty()) {
    const RankEstimate& r = rank == "rank0" ? estimate->ranks.front() : estimate->ranks.back();
    bytes = r.allocated_bytes;
    p.pp_rank = r.pp_rank;
  }
  p.predicted_bytes = bytes;
  p.error_pct =
      100.0 * static_cast<double>(bytes - c.measured_bytes) / static_cast<double>(c.measured_bytes);
  p.status = "ok";
  return p;
}

ErrorSummary Summarize(Mode mode, const std::vector<const Prediction*>& predictions) {
  ErrorSummary s;
  s.mode = mode;
  s.cases = static_cast<int>(predictions.size());
  std::vector<double> errors;
  for (const Prediction* p : predictions) {
    if (p->error_pct) errors.push_back(std::fabs(*p->error_pct));
  }
  s.predicted = static_cast<int>(errors.size());
  s.coverage = s.cases == 0 ? 0 : static_cast<double>(s.predicted) / s.cases;
  const internal::ErrorStats stats = internal::AbsoluteErrorStats(std::move(errors));
  s.median_abs_error_pct = stats.median;
  s.p90_abs_error_pct = stats.p90;
  s.max_abs_error_pct = stats.max;
  return s;
}

}  // namespace

Result<std::vector<ValidationCase>> ParseValidationCases(std::string_view jsonl,
                                                         std::string_view source_name) {
  std::vector<ValidationCase> cases;
  std::size_t line_no = 0, start = 0;
  while (start <= jsonl.size()) {
    std::size_t end = jsonl.find('\n', start);
    if (end == std::string_view::npos) end = jsonl.size();
    const std::string_view line = jsonl.substr(start, end - start);
    ++line_no;
    start = end + 1;
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string_view::npos || line[first] == '#') continue;
    const std::string where = std::string(source_name) + ":" + std::to_string(line_no);
    MEMTUNE_TRY(const json j, model::ParseStrictJson(line, where));
    MEMTUNE_TRY(auto c, ParseCase(j, where));
    cases.push_back(std::move(c));
  }
  if (cases.empty()) {  // an empty or comment-only file is a mistake, not a 0-case success
    return InvalidInput(std::string(source_name),
                        "no validation cases (one JSON object per line expected)");
  }
  return cases;
}

ValidationReport Validate(const std::vector<ValidationCase>& cases,
                          const ValidateOptions& options) {
  ValidationReport report;
  for (const auto& c : cases) {
    CaseResult r;
    r.measured = c;
    r.after_iterations =
        options.after_iterations > 0 ? options.after_iterations : c.after_iterations;
    model::ParseOptions parse;
    parse.source_name = c.id;
    auto doc = model::ParseJobText(c.job_text, parse);
    auto fill = [&](Mode mode) {
      const std::string& rank = options.rank_override.empty() ? c.rank : options.rank_override;
      if (doc && c.IsThroughput()) return internal::PredictThroughput(c, doc->job, mode);
      if (doc) return Predict(c, doc->job, mode, rank, r.after_iterations);
      Prediction p;
      p.mode = mode;
      p.status = "error";
      p.reason = doc.error().Describe();
      return p;
    };
    r.accurate = fill(Mode::kAccurate);
    for (Mode mode : options.compare) r.compare.push_back(fill(mode));
    report.cases.push_back(std::move(r));
  }
  std::vector<const Prediction*> accurate;
  for (const auto& r : report.cases) {
    if (!r.measured.IsThroughput()) accurate.push_back(&r.accurate);
  }
  report.summary = Summarize(Mode::kAccurate, accurate);
  report.throughput = internal::SummarizeThroughput(report.cases);
  for (std::size_t i = 0; i < options.compare.size(); ++i) {
    std::vector<const Prediction*> column;
    for (const auto& r : report.cases) {
      if (!r.measured.IsThroughput()) column.push_back(&r.compare[i]);
    }
    report.compare.push_back(Summarize(options.compare[i], column));
  }
  return report;
}

}  // namespace memtune::assess
