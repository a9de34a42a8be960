// Text rendering of a validation: one row per case, then the error summary per mode.
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "memtune/report/estimate_report.h"

namespace memtune::report {
namespace {

std::string Gb(std::int64_t bytes) {
  return fmt::format("{:.2f}", static_cast<double>(bytes) / 1e9);
}

// A throughput value with precision to suit its size (0.514 MFU, 704.0 TFLOP/s, 14451).
std::string Value(double v) {
  return v < 10      ? fmt::format("{:.3f}", v)
         : v < 10000 ? fmt::format("{:.1f}", v)
                     : fmt::format("{:.0f}", v);
}

std::string Cell(const assess::Prediction& p) {
  if (p.predicted_value)
    return fmt::format("{:>9} {:>+7.1f}%", Value(*p.predicted_value), *p.error_pct);
  if (!p.predicted_bytes)
    return fmt::format("{:>9} {:>8}", "-", p.status == "unsupported" ? "unsupp." : p.status);
  return fmt::format("{:>9} {:>+7.1f}%", Gb(*p.predicted_bytes), *p.error_pct);
}

// Throughput metrics in the 13-wide metric column.
std::string ShortMetric(const std::string& metric) {
  if (metric == "tokens_per_s_per_gpu") return "tokens/s/gpu";
  if (metric == "tflops_per_gpu") return "tflops/gpu";
  if (metric == "step_time_s") return "step_time_s";
  return metric;
}

std::string ThroughputLines(const assess::ThroughputSummary& s) {
  std::string out = fmt::format(
      "  throughput: {} cases, {} predicted; |error| median {:.1f}%, p90 {:.1f}%, max {:.1f}%\n",
      s.cases, s.predicted, s.median_abs_error_pct, s.p90_abs_error_pct, s.max_abs_error_pct);
  out += fmt::format(
      "  within groups: |ratio error| median {:.1f}%; order right in {} of {} pairs ({:.0f}%)\n",
      s.median_abs_ratio_error_pct, s.pairs_right, s.pairs,
      s.pairs > 0 ? 100.0 * s.pairs_right / s.pairs : 100.0);
  for (const assess::GroupSummary& g : s.groups) {
    if (g.cases < 2) continue;
    out += fmt::format("    {}: {} of {} predicted, order {}/{}", g.group, g.predicted, g.cases,
                       g.pairs_right, g.pairs);
    std::string ratios;
    for (const auto& [id, error] : g.ratio_error_pct) {
      ratios += fmt::format("{}{} {:+.1f}%", ratios.empty() ? "" : ", ", id, error);
    }
    if (!ratios.empty()) out += "; ratio errors: " + ratios;
    out += "\n";
  }
  return out;
}

std::string SummaryLine(const assess::ErrorSummary& s) {
  if (s.predicted == 0)
    return fmt::format("{}: {} cases, none predicted", estimate::ModeName(s.mode), s.cases);
  return fmt::format(
      "{}: {} cases, {} predicted (coverage {:.0f}%); |error| median {:.1f}%, "
      "p90 {:.1f}%, max {:.1f}%",
      estimate::ModeName(s.mode), s.cases, s.predicted, 100.0 * s.coverage, s.median_abs_error_pct,
      s.p90_abs_error_pct, s.max_abs_error_pct);
}

}  // namespace

std::string RenderValidateText(const assess::ValidationReport& report) {
  std::size_t id_width = 4;
  for (const auto& c : report.cases) id_width = std::max(id_width, c.measured.id.size());
  // A column for the memory report a number was read from, when any case has one.
  const bool after_column =
      std::any_of(report.cases.begin(), report.cases.end(),
                  [](const assess::CaseResult& c) { return c.after_iterations > 0; });
  auto after_cell = [&](const assess::CaseResult& c) -> std::string {
    if (!after_column) return "";
    const int n = c.after_iterations;
    return fmt::format(" {:>5}", n > 0 ? std::to_string(n) : std::string("run"));
  };
  std::string out = fmt::format(
      "{:<{}} {:<13} {:<5}{} {:>9} {:>18}", "id", id_width, "metric", "rank",
      after_column ? fmt::format(" {:>5}", "after") : std::string(), "measured", "accurate  error");
  for (const auto& s : report.compare)
    out += fmt::format(" {:>18}", std::string(estimate::ModeName(s.mode)) + "  error");
  out += "\n";
  for (const auto& c : report.cases) {
    const bool throughput = c.measured.IsThroughput();
    out +=
        fmt::format("{:<{}} {:<13} {:<5}{} {:>9} {}", c.measured.id, id_width,
                    throughput ? ShortMetric(c.measured.metric) : c.measured.metric,
                    throughput ? "-" : c.measured.rank, after_cell(c),
                    throughput ? Value(c.measured.measured_value) : Gb(c.measured.measured_bytes),
                    Cell(c.accurate));
    for (const auto& p : c.compare) {
      out += ' ';  // appended: GCC 12's -Wrestrict misfires on " " + string
      out += Cell(p);
    }
    out += "\n";
  }
  out += "(GB = 1e9 bytes; error = (predicted - measured) / measured)\n";
  if (report.throughput.cases > 0) {
    out +=
        "(throughput rows: measured and predicted in the case's metric; ratio error: the "
        "case's throughput relative to its group's first case, predicted vs measured)\n";
  }
  if (after_column) {
    out +=
        "(after: the number is predicted as a memory report after that many iterations prints it, "
        "PyTorch's peaks since start-up through that iteration's optimizer step; run: the whole "
        "run)\n";
  }
  bool header = false;
  for (const auto& c : report.cases) {
    if (c.accurate.predicted_bytes || c.accurate.predicted_value) continue;
    if (!header) out += "\nnot predicted:\n";
    header = true;
    out += fmt::format("  {} ({}): {}\n", c.measured.id, c.accurate.status, c.accurate.reason);
  }
  out += "\nsummary:\n";
  if (report.summary.cases > 0 || report.throughput.cases == 0)
    out += "  " + SummaryLine(report.summary) + "\n";
  if (report.throughput.cases > 0) out += ThroughputLines(report.throughput);
  for (const auto& s : report.compare) out += "  " + SummaryLine(s) + "\n";
  return out;
}

}  // namespace memtune::report
