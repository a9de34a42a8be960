// JSON rendering of estimates (memtune.estimate/1) and validations (memtune.validate/1).
#include <nlohmann/json.hpp>

#include "memtune/report/estimate_report.h"
#include "report/estimate_forecast.h"

namespace memtune::report {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const char* KindName(estimate::ComponentKind kind) {
  switch (kind) {
    case estimate::ComponentKind::kParameters:
      return "parameters";
    case estimate::ComponentKind::kGradients:
      return "gradients";
    case estimate::ComponentKind::kOptimizer:
      return "optimizer";
    case estimate::ComponentKind::kActivations:
      return "activations";
    case estimate::ComponentKind::kLogits:
      return "logits";
    case estimate::ComponentKind::kTransient:
      return "transient";
  }
  return "parameters";
}

// The memory outside PyTorch of one rank: totals by key and the parts.
void AddOutsideJson(ordered_json& j, const nonpytorch::NonPytorchMemory& m) {
  ordered_json keys = ordered_json::object(), parts = ordered_json::array();
  for (const std::string& k : m.Keys()) keys[k] = m.KeyBytes(k);
  for (const nonpytorch::Part& p : m.parts) {
    parts.push_back({{"name", p.name},
                     {"key", p.key},
                     {"bytes", p.bytes},
                     {"low_bytes", p.low_bytes},
                     {"high_bytes", p.high_bytes},
                     {"moment", nonpytorch::MomentName(p.moment)},
                     {"detail", p.detail}});
  }
  j["non_pytorch"] = keys;
  j["non_pytorch_bytes"] = m.TotalBytes();
  j["non_pytorch_details"] = parts;
}

ordered_json RankJson(const estimate::RankEstimate& r) {
  ordered_json j;
  j["pp_rank"] = r.pp_rank;
  j["layers"] = r.layers;
  j["in_flight_microbatches"] = r.in_flight_microbatches;
  j["peak_phase"] = r.peak_phase;
  j["allocated_bytes"] = r.allocated_bytes;
  j["model_state_bytes"] = r.model_state_bytes;
  j["activation_bytes"] = r.activation_bytes;
  j["transient_bytes"] = r.transient_bytes;
  ordered_json components = ordered_json::object(), details = ordered_json::array();
  for (const auto& c : r.components) {
    components[std::string(c.name)] = c.bytes;
    details.push_back({{"name", c.name},
                       {"bytes", c.bytes},
                       {"kind", KindName(c.kind)},
                       {"expert", c.expert},
                       {"explanation", c.explanation}});
  }
  j["components"] = components;
  j["component_details"] = details;
  return j;
}

ordered_json Nullable(const std::optional<std::int64_t>& v) {
  return v ? ordered_json(*v) : ordered_json();
}
ordered_json Nullable(const std::optional<double>& v) {
  return v ? ordered_json(*v) : ordered_json();
}

ordered_json PredictionJson(const assess::Prediction& p) {
  ordered_json j;
  j["predicted_bytes"] = Nullable(p.predicted_bytes);
  j["error_pct"] = Nullable(p.error_pct);
  j["status"] = p.status;
  if (!p.reason.empty()) j["reason"] = p.reason;
  if (p.pp_rank >= 0) j["pp_rank"] = p.pp_rank;
  return j;
}

ordered_json SummaryJson(const assess::ErrorSummary& s) {
  ordered_json j;
  j["cases"] = s.cases;
  j["predicted"] = s.predicted;
  j["coverage"] = s.coverage;
  j["median_abs_error_pct"] = s.median_abs_error_pct;
  j["p90_abs_error_pct"] = s.p90_abs_error_pct;
  j["max_abs_error_pct"] = s.max_abs_error_pct;
  return j;
}

}  // namespace

std::string RenderEstimateJson(const assess::Assessment& a, const EstimateReportContext& ctx) {
  const estimate::Estimate& e = a.estimate;
  ordered_json j;
  j["schema"] = "memtune.estimate/1";
  j["mode"] = estimate::ModeName(e.mode);
  if (!ctx.job_name.empty()) j["job"] = ctx.job_name;
  if (!ctx.precision.empty()) j["precision"] = ctx.precision;
  if (!ctx.parameters.empty()) j["parameters"] = ctx.parameters;
  j["ranks"] = ordered_json::array();
  for (std::size_t i = 0; i < e.ranks.size(); ++i) {
    ordered_json rank = RankJson(e.ranks[i]);
    if (i < a.non_pytorch.size()) AddOutsideJson(rank, a.non_pytorch[i]);
    j["ranks"].push_back(std::move(rank));
  }
  j["peak"] = {{"pp_rank", e.peak_pp_rank}, {"allocated_bytes", e.peak_allocated_bytes}};
  ordered_json gpu;
  gpu["name"] = ctx.gpu_name;
  gpu["capacity_bytes"] = e.gpu_capacity_bytes;
  if (a.allocated_fit) {
    gpu["pp_rank"] = a.allocated_fit->pp_rank;
    gpu["non_pytorch_bytes"] = e.gpu_capacity_bytes - a.allocated_fit->usable_bytes;
    gpu["usable_bytes"] = a.allocated_fit->usable_bytes;
    gpu["fits"] = a.allocated_fit->fits;
    gpu["headroom_bytes"] = a.allocated_fit->headroom_bytes;
  } else {
    gpu["non_pytorch_bytes"] = nullptr;
    gpu["usable_bytes"] = nullptr;
    gpu["fits"] = nullptr;
    gpu["headroom_bytes"] = nullptr;
  }
  j["gpu"] = gpu;
  j["verdict"] = internal::VerdictJson(a);
  j["advice"] = internal::AdviceJson(a);
  if (a.forecast) internal::AddForecastJson(j, *a.forecast);  // reserved per mode and stage
  if (!a.forecast_note.empty()) j["allocator_note"] = a.forecast_note;
  j["defaults_used"] = ctx.defaults_used;
  j["assumptions"] = e.assumptions;
  j["upstream_lines"] = e.upstream_lines;
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

ordered_json ThroughputJson(const assess::ThroughputSummary& s) {
  ordered_json j;
  j["cases"] = s.cases;
  j["predicted"] = s.predicted;
  j["median_abs_error_pct"] = s.median_abs_error_pct;
  j["p90_abs_error_pct"] = s.p90_abs_error_pct;
  j["max_abs_error_pct"] = s.max_abs_error_pct;
  j["median_abs_ratio_error_pct"] = s.median_abs_ratio_error_pct;
  j["pairs"] = s.pairs;
  j["pairs_right"] = s.pairs_right;
  j["groups"] = ordered_json::array();
  for (const assess::GroupSummary& g : s.groups) {
    ordered_json row;
    row["group"] = g.group;
    row["cases"] = g.cases;
    row["predicted"] = g.predicted;
    row["pairs"] = g.pairs;
    row["pairs_right"] = g.pairs_right;
    ordered_json ratios = ordered_json::object();
    for (const auto& [id, error] : g.ratio_error_pct) ratios[id] = error;
    row["ratio_error_pct"] = ratios;
    j["groups"].push_back(row);
  }
  return j;
}

std::string RenderValidateJson(const assess::ValidationReport& report) {
  ordered_json j;
  j["schema"] = "memtune.validate/1";
  j["cases"] = ordered_json::array();
  for (const auto& c : report.cases) {
    ordered_json row;
    row["id"] = c.measured.id;
    row["metric"] = c.measured.metric;
    const assess::Prediction& p = c.accurate;
    if (c.measured.IsThroughput()) {  // the case's unit, not bytes
      if (!c.measured.group.empty()) row["group"] = c.measured.group;
      row["measured_value"] = c.measured.measured_value;
      if (!c.measured.flops_formula.empty()) row["flops_formula"] = c.measured.flops_formula;
      row["predicted_value"] = Nullable(p.predicted_value);
    } else {
      row["rank"] = c.measured.rank;
      row["measured_bytes"] = c.measured.measured_bytes;
      if (c.after_iterations > 0)
        row["after_iterations"] = c.after_iterations;  // the report predicted
      row["predicted_bytes"] = Nullable(p.predicted_bytes);
    }
    row["error_pct"] = Nullable(p.error_pct);
    row["status"] = p.status;
    if (!p.reason.empty()) row["reason"] = p.reason;
    if (p.pp_rank >= 0) row["pp_rank"] = p.pp_rank;
    if (!c.compare.empty()) {
      ordered_json compare = ordered_json::object();
      for (const auto& p : c.compare) compare[estimate::ModeName(p.mode)] = PredictionJson(p);
      row["compare"] = compare;
    }
    j["cases"].push_back(row);
  }
  j["summary"] = SummaryJson(report.summary);
  if (report.throughput.cases > 0) j["throughput_summary"] = ThroughputJson(report.throughput);
  if (!report.compare.empty()) {
    ordered_json compare = ordered_json::object();
    for (const auto& s : report.compare) compare[estimate::ModeName(s.mode)] = SummaryJson(s);
    j["compare_summary"] = compare;
  }
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace memtune::report
