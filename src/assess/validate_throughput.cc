// Throughput validation: the step-time model against measured runs.
#include "assess/validate_throughput.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "assess/error_stats.h"
#include "memtune/model/strict_json.h"
#include "memtune/steptime/step_time.h"

namespace memtune::assess::internal {
namespace {

// Higher is better for every metric but the step time.
double Throughput(const std::string& metric, double value) {
  return metric == "step_time_s" ? 1.0 / value : value;
}

}  // namespace

bool IsThroughputMetric(const std::string& metric) {
  return metric == "tokens_per_s_per_gpu" || metric == "step_time_s" ||
         metric == "tflops_per_gpu" || metric == "mfu";
}

Status ParseThroughputMeasurement(const nlohmann::json& m, const std::string& where,
                                  ValidationCase& c) {
  const nlohmann::json* value = m.contains("value") ? &m["value"] : nullptr;
  const double limit = c.metric == "mfu" ? 1.0 : 1e12;
  if (value == nullptr || !value->is_number() || !(value->get<double>() > 0) ||
      value->get<double>() > limit) {
    return InvalidInput(
        where, "measured.value must be a number above 0" +
                   std::string(c.metric == "mfu" ? " and at most 1" : "") + " for metric " +
                   c.metric + " (got " +
                   (value == nullptr ? std::string("nothing") : model::JsonEcho(*value)) + ")");
  }
  c.measured_value = value->get<double>();
  if (m.contains("unit") && m["unit"].is_string()) c.unit = m["unit"].get<std::string>();
  if (c.metric == "tflops_per_gpu" || c.metric == "mfu") {
    const nlohmann::json* f = m.contains("flops_formula") ? &m["flops_formula"] : nullptr;
    if (f == nullptr || !f->is_string() ||
        !steptime::ParseFlopsFormula(f->get<std::string>(), "measured.flops_formula")) {
      return InvalidInput(where, "measured.flops_formula must be causal or noncausal for metric " +
                                     c.metric + " (got " +
                                     (f == nullptr ? std::string("nothing") : model::JsonEcho(*f)) +
                                     ")");
    }
    c.flops_formula = f->get<std::string>();
  }
  c.rank = "max";
  return OkStatus();
}

Prediction PredictThroughput(const ValidationCase& c, const model::Job& job, Mode mode) {
  Prediction p;
  p.mode = mode;
  if (mode != Mode::kAccurate) {
    p.status = "unsupported";
    p.reason = "throughput metric " + c.metric + " needs the step-time model (accurate mode)";
    return p;
  }
  auto step = steptime::PredictStepTime(job);
  if (!step) {
    p.status = step.error().code == ErrorCode::kUnsupported || step.error().field == "memtune.gpu"
                   ? "unsupported"
                   : "error";
    p.reason = step.error().Describe();
    return p;
  }
  const int world = std::max(1, job.memtune.world_size);
  const steptime::FlopsFormula formula = c.flops_formula == "noncausal"
                                             ? steptime::FlopsFormula::kNoncausal
                                             : steptime::FlopsFormula::kCausal;
  double value = 0;
  if (c.metric == "step_time_s") value = step->step_time_s;
  if (c.metric == "tokens_per_s_per_gpu") value = step->tokens_per_s_per_gpu;
  if (c.metric == "tflops_per_gpu") value = step->TflopsPerGpu(formula, world);
  if (c.metric == "mfu") value = step->Mfu(formula, world);
  p.predicted_value = value;
  p.error_pct = 100.0 * (value - c.measured_value) / c.measured_value;
  p.pp_rank = step->critical_pp_rank;
  p.status = "ok";
  return p;
}

ThroughputSummary SummarizeThroughput(const std::vector<CaseResult>& cases) {
  ThroughputSummary s;
  std::vector<double> errors, ratio_errors;
  std::map<std::string, std::size_t> index;
  std::vector<std::vector<const CaseResult*>> members;
  for (const CaseResult& r : cases) {
    if (!r.measured.IsThroughput()) continue;
    ++s.cases;
    if (r.accurate.error_pct) {
      ++s.predicted;
      errors.push_back(std::fabs(*r.accurate.error_pct));
    }
    if (r.measured.group.empty()) continue;
    auto [it, added] = index.emplace(r.measured.group, s.groups.size());
    if (added) {
      s.groups.push_back({});
      s.groups.back().group = r.measured.group;
      members.emplace_back();
    }
    members[it->second].push_back(&r);
  }
  for (std::size_t g = 0; g < s.groups.size(); ++g) {
    GroupSummary& group = s.groups[g];
    std::vector<const CaseResult*> done;
    for (const CaseResult* r : members[g]) {
      ++group.cases;
      if (r->accurate.predicted_value) done.push_back(r);
    }
    group.predicted = static_cast<int>(done.size());
    // Ratios compare like with like: every case's metric as a throughput (1 / step time).
    for (std::size_t i = 1; i < done.size(); ++i) {
      const double measured =
          Throughput(done[i]->measured.metric, done[i]->measured.measured_value) /
          Throughput(done[0]->measured.metric, done[0]->measured.measured_value);
      const double predicted =
          Throughput(done[i]->measured.metric, *done[i]->accurate.predicted_value) /
          Throughput(done[0]->measured.metric, *done[0]->accurate.predicted_value);
      const double error = 100.0 * (predicted / measured - 1);
      group.ratio_error_pct.emplace_back(done[i]->measured.id, error);
      ratio_errors.push_back(std::fabs(error));
    }
    // Pairs: only cases of the same metric are ordered against each other.
    for (std::size_t i = 0; i < done.size(); ++i) {
      for (std::size_t j = i + 1; j < done.size(); ++j) {
        if (done[i]->measured.metric != done[j]->measured.metric) continue;
        const std::string& metric = done[i]->measured.metric;
        const double mi = Throughput(metric, done[i]->measured.measured_value);
        const double mj = Throughput(metric, done[j]->measured.measured_value);
        if (std::fabs(mi - mj) < 0.01 * std::max(mi, mj)) continue;  // a tie within 1%
        const double pi = Throughput(metric, *done[i]->accurate.predicted_value);
        const double pj = Throughput(metric, *done[j]->accurate.predicted_value);
        ++group.pairs;
        if ((mi > mj) == (pi > pj)) ++group.pairs_right;
      }
    }
    s.pairs += group.pairs;
    s.pairs_right += group.pairs_right;
  }
  const ErrorStats absolute = AbsoluteErrorStats(std::move(errors));
  s.median_abs_error_pct = absolute.median;
  s.p90_abs_error_pct = absolute.p90;
  s.max_abs_error_pct = absolute.max;
  s.median_abs_ratio_error_pct = AbsoluteErrorStats(std::move(ratio_errors)).median;
  return s;
}

}  // namespace memtune::assess::internal
