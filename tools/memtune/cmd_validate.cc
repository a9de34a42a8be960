// memtune validate: predicts measured runs (JSON Lines validation cases) and reports errors.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>

#include "command.h"
#include "commands.h"
#include "memtune/core/file.h"
#include "memtune/estimate/validate.h"
#include "memtune/report/estimate_report.h"
#include "memtune/synth/forecast.h"

namespace memtune::cli {
namespace {

// max_reserved / device_used / peak_active of the accurate mode, and every metric as of a
// memory report after N iterations: replay every rank's synthesized trace once under the
// job's allocator config (docs/synth.md). device_used adds the CUDA context and non-PyTorch
// memory to reserved; peak_active is the replay's active_bytes.all.peak (allocated plus
// blocks still awaiting another stream); max_allocated replays without a capacity (the
// trace's allocated peak does not depend on the allocator). after_iterations > 0 reads the
// peaks through that iteration.
Result<std::pair<int, std::int64_t>> AllocatorMetric(const model::Job& job, const estimate::Estimate& e,
                                                     const std::string& metric, const std::string& rank,
                                                     int after_iterations) {
  synth::ForecastOptions options;
  options.capacity_bytes = e.gpu_capacity_bytes;
  options.non_pytorch_bytes = e.non_pytorch_bytes;
  // The synthesized iterations repeat from the second on (the same events: Adam's state
  // exists, nothing else changes), so the allocator settles within a few of them: a report
  // after N > kMaxReplayedIterations iterations reads the last replayed one's peaks. This
  // keeps a large N (the case format allows 1000) from replaying thousands of iterations.
  constexpr int kMaxReplayedIterations = 4;
  options.synth.iterations = std::clamp(after_iterations, options.synth.iterations, kMaxReplayedIterations);
  MEMTUNE_TRY(const auto synth, synth::TraceSynthesizer::Create(job, options.synth));
  MEMTUNE_TRY(const alloc::AllocatorConfig config, synth::JobAllocatorConfig(job, options));
  const bool allocated = metric == "max_allocated";
  const std::int64_t extra = metric == "device_used" ? e.non_pytorch_bytes : 0;
  // The whole run's peak, or the peak through iteration `after_iterations` (reserved and
  // active stop at an OOM, and then the run never printed that report: the run's peak so far
  // is used).
  auto through = [&](const std::vector<std::int64_t>& v, std::int64_t whole) {
    if (after_iterations <= 0 || v.empty()) return whole;
    return v[std::min<std::size_t>(static_cast<std::size_t>(after_iterations), v.size()) - 1];
  };
  auto value = [&](int pp_rank) -> std::int64_t {
    const synth::AllocatorRun run =
        synth::SimulateRank(synth, pp_rank, config, allocated ? 0 : options.capacity_bytes,
                            allocated ? 0 : options.non_pytorch_bytes);
    if (allocated) return through(run.peak_allocated_through_iteration_bytes, run.peak_allocated_bytes);
    if (metric == "peak_active") return through(run.peak_active_through_iteration_bytes, run.peak_active_bytes);
    return through(run.peak_reserved_through_iteration_bytes, run.peak_reserved_bytes) + extra;
  };
  const int last = synth.num_stages() - 1;
  if (rank != "max") {  // "rank0" or "last"
    const int r = rank == "last" ? last : 0;
    return std::pair<int, std::int64_t>{r, value(r)};
  }
  std::pair<int, std::int64_t> best{0, value(0)};  // "max": the stage with the highest value
  for (int r = 1; r <= last; ++r) {
    const std::int64_t v = value(r);
    if (v > best.second) best = {r, v};
  }
  return best;
}

}  // namespace

int RunValidate(int argc, char** argv) {
  CLI::App app(
      "Predict every validation case of a JSON Lines file (docs/job-format.md section 2) and "
      "report the error against its measurement, with a summary.",
      "memtune validate");
  app.footer(
      "Example:\n  memtune validate measured.jsonl --compare megatron-lm,bridge\n"
      "  memtune validate measured.jsonl --format json\n"
      "  memtune validate measured.jsonl --after-iterations 1   # as Megatron's first memory report");
  std::string path, compare, rank;
  int after_iterations = 0;
  OutputFormat format = OutputFormat::kText;
  app.add_option("FILE", path, "validation cases, one JSON object per line")->required();
  app.add_option("--compare", compare, "compatibility modes to add side by side: megatron-lm,bridge");
  app.add_option("--rank", rank, "predict this rank for every case instead of its own: max, rank0, last")
      ->check(CLI::IsMember({"max", "rank0", "last"}));
  app.add_option("--after-iterations", after_iterations,
                 "predict each metric as printed by a memory report after N training iterations "
                 "(Megatron's \"(after N iterations) memory\"; 1 excludes Adam's moments until the "
                 "first step) instead of the whole run's peak; accurate mode only")
      ->check(CLI::Range(1, estimate::kMaxAfterIterations));
  AddFormatOption(app, format);
  if (int code = ParseArgs(app, argc, argv); code >= 0) return code;

  estimate::ValidateOptions options;
  options.rank_override = rank;
  options.after_iterations = after_iterations;
  options.allocator_metric = AllocatorMetric;
  std::stringstream modes(compare);
  for (std::string name; std::getline(modes, name, ',');) {
    if (name.empty()) continue;
    auto mode = estimate::ParseMode(name, "--compare");
    if (!mode) return PrintError("validate", mode.error());
    options.compare.push_back(*mode);
  }
  auto text = ReadInputFile(path, "FILE");
  if (!text) return PrintError("validate", text.error());
  auto cases = estimate::ParseValidationCases(*text, path);
  if (!cases) return PrintError("validate", cases.error());
  const auto report = estimate::Validate(*cases, options);
  std::cout << (format == OutputFormat::kJson ? report::RenderValidateJson(report)
                                              : report::RenderValidateText(report));
  return kExitOk;
}

}  // namespace memtune::cli
