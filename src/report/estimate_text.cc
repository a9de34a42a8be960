// Text rendering of an estimate: the per-stage component table and the verdict.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "memtune/core/units.h"
#include "memtune/report/estimate_report.h"
#include "report/estimate_forecast.h"

namespace memtune::report {
namespace {

std::string Gb(std::int64_t bytes) {
  return fmt::format("{:.2f}", static_cast<double>(bytes) / 1e9);
}

// Component names in first-seen order over all ranks, with their explanation.
std::vector<std::pair<std::string, std::string>> ComponentRows(const estimate::Estimate& e) {
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& rank : e.ranks) {
    for (const auto& c : rank.components) {
      const bool seen =
          std::any_of(rows.begin(), rows.end(), [&](const auto& r) { return r.first == c.name; });
      if (!seen) rows.emplace_back(c.name, c.explanation);
    }
  }
  return rows;
}

std::int64_t BytesOf(const estimate::RankEstimate& rank, const std::string& name) {
  for (const auto& c : rank.components) {
    if (c.name == name) return c.bytes;
  }
  return 0;
}

void AppendTable(std::string& out, const estimate::Estimate& e) {
  const auto rows = ComponentRows(e);
  std::size_t width = 10;
  for (const auto& r : rows) width = std::max(width, r.first.size());
  out += fmt::format("{:<{}}", "GB (1e9)", width);
  for (const auto& rank : e.ranks)
    out += fmt::format(" {:>9}", fmt::format("rank {}", rank.pp_rank));
  out += "\n";
  for (const auto& [name, _] : rows) {
    out += fmt::format("{:<{}}", name, width);
    for (const auto& rank : e.ranks) {
      const std::int64_t b = BytesOf(rank, name);
      out += fmt::format(" {:>9}", b == 0 ? std::string("-") : Gb(b));
    }
    out += "\n";
  }
  out += fmt::format("{:<{}}", "allocated", width);
  for (const auto& rank : e.ranks) out += fmt::format(" {:>9}", Gb(rank.allocated_bytes));
  out += "\n";
  if (e.mode == estimate::Mode::kAccurate) {
    out += fmt::format("{:<{}}", "peak at", width);
    for (const auto& rank : e.ranks) {
      // Nine-column labels of RankEstimate::peak_phase.
      const char* phase = rank.peak_phase == "backward"        ? "backward"
                          : rank.peak_phase == "loss backward" ? "loss bwd"
                          : rank.peak_phase == "forward"       ? "forward"
                                                               : "opt.step";
      out += fmt::format(" {:>9}", phase);
    }
    out += fmt::format("\n{:<{}}", "in flight", width);
    for (const auto& rank : e.ranks) out += fmt::format(" {:>9}", rank.in_flight_microbatches);
    out += fmt::format("\n{:<{}}", "layers", width);
    for (const auto& rank : e.ranks) out += fmt::format(" {:>9}", rank.layers);
    out += "\n";
  }
  out += "\ncomponents:\n";
  for (const auto& [name, explanation] : rows)
    out += fmt::format("  {:<{}}  {}\n", name, width, explanation);
}

// The memory outside PyTorch per rank, by key, and the deciding rank's communicators.
void AppendOutsideTable(std::string& out, const assess::Assessment& a) {
  if (a.non_pytorch.empty()) return;
  std::vector<std::string> keys;
  for (const auto& m : a.non_pytorch) {
    for (const std::string& k : m.Keys()) {
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
  }
  const std::size_t width = 22;
  out += fmt::format("\n{:<{}}", "outside PyTorch (GB)", width);
  for (const auto& rank : a.estimate.ranks)
    out += fmt::format(" {:>9}", fmt::format("rank {}", rank.pp_rank));
  out += "\n";
  for (const std::string& k : keys) {
    out += fmt::format("  {:<{}}", k, width - 2);
    for (const auto& m : a.non_pytorch) {
      const std::int64_t b = m.KeyBytes(k);
      out += fmt::format(" {:>9}", b == 0 ? std::string("-") : Gb(b));
    }
    out += "\n";
  }
  out += fmt::format("  {:<{}}", "total", width - 2);
  for (const auto& m : a.non_pytorch) out += fmt::format(" {:>9}", Gb(m.TotalBytes()));
  out += fmt::format("\n  {:<{}}", "range", width - 2);
  for (const auto& m : a.non_pytorch)
    out += fmt::format(" {:>9}", Gb(m.LowBytes()) + "-" + Gb(m.HighBytes()));
  out += "\n";
  // The communicators of the rank the allocated fit decides on (the first rank without one).
  std::size_t shown = 0;
  for (std::size_t i = 0; i < a.estimate.ranks.size(); ++i) {
    if (a.allocated_fit && a.estimate.ranks[i].pp_rank == a.allocated_fit->pp_rank) shown = i;
  }
  std::string comms;
  for (const auto& p : a.non_pytorch[shown].parts) {
    if (p.key != "nccl") continue;
    comms += fmt::format("{}{} {}", comms.empty() ? "" : ", ", p.name.substr(5), Gb(p.bytes));
  }
  if (!comms.empty()) {
    out += fmt::format("  nccl on rank {} by communicator: {}\n", a.estimate.ranks[shown].pp_rank,
                       comms);
  }
}

void AppendVerdict(std::string& out, const assess::Assessment& a,
                   const EstimateReportContext& ctx) {
  const estimate::Estimate& e = a.estimate;
  const std::int64_t peak = e.peak_allocated_bytes;
  out += fmt::format("\nmost loaded: pipeline rank {}, {} GB ({}) allocated\n", e.peak_pp_rank,
                     Gb(peak), FormatBytesBinary(peak));
  if (!a.allocated_fit) {
    out += "fits: unknown (no GPU given: set memtune.gpu or memtune.gpu_memory_bytes)\n";
    return;
  }
  const assess::AllocatedFit& fit = *a.allocated_fit;
  AppendOutsideTable(out, a);
  out += fmt::format("GPU {}: {} GB capacity - {} GB outside PyTorch on rank {} = {} GB usable\n",
                     ctx.gpu_name.empty() ? "(memtune.gpu_memory_bytes)" : ctx.gpu_name,
                     Gb(e.gpu_capacity_bytes), Gb(e.gpu_capacity_bytes - fit.usable_bytes),
                     fit.pp_rank, Gb(fit.usable_bytes));
  if (fit.fits) {
    out += fmt::format(
        "fits: yes, {} GB to spare on the tightest rank (before allocator fragmentation)\n",
        Gb(fit.headroom_bytes));
  } else {
    out +=
        fmt::format("fits: NO, rank {} is over by {} GB\n", fit.pp_rank, Gb(-fit.headroom_bytes));
  }
}

void AppendList(std::string& out, const char* title, const std::vector<std::string>& items) {
  if (items.empty()) return;
  out += fmt::format("\n{}:\n", title);
  for (const auto& item : items) out += fmt::format("  - {}\n", item);
}

}  // namespace

std::string RenderEstimateText(const assess::Assessment& a, const EstimateReportContext& ctx) {
  const estimate::Estimate& e = a.estimate;
  std::string out = fmt::format("memtune estimate ({} mode){}\n", estimate::ModeName(e.mode),
                                ctx.job_name.empty() ? "" : ": " + ctx.job_name);
  if (!ctx.precision.empty()) out += "precision: " + ctx.precision + "\n";
  if (!ctx.parameters.empty()) out += "parameters: " + ctx.parameters + "\n";
  out += "\n";
  AppendTable(out, e);
  AppendVerdict(out, a, ctx);
  if (a.forecast) internal::AppendForecastText(out, a, *a.forecast);  // reserved, verdicts, advice
  if (!a.forecast_note.empty()) out += "\nallocator: " + a.forecast_note + "\n";
  AppendList(out, "defaults assumed", ctx.defaults_used);
  AppendList(out, "assumptions", e.assumptions);
  AppendList(out, "upstream prints", e.upstream_lines);
  return out;
}

}  // namespace memtune::report
