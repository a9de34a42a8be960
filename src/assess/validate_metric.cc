// A validation case's allocator metric from the synthesized trace and the simulator.
#include "assess/validate_metric.h"

#include <algorithm>
#include <vector>

#include "assess/outside.h"
#include "memtune/synth/forecast.h"

namespace memtune::assess::internal {

Result<std::pair<int, std::int64_t>> AllocatorMetric(const model::Job& job,
                                                     const estimate::Estimate& e,
                                                     const std::string& metric,
                                                     const std::string& rank,
                                                     int after_iterations) {
  synth::ForecastOptions options;
  options.capacity_bytes = e.gpu_capacity_bytes;
  if (e.mode == estimate::Mode::kAccurate) {
    MEMTUNE_TRY(options.non_pytorch, OutsideMemory(job, e));
  }
  options.synth.iterations =
      std::clamp(after_iterations, options.synth.iterations, kMaxReplayedIterations);
  MEMTUNE_TRY(const auto synth, synth::TraceSynthesizer::Create(job, options.synth));
  MEMTUNE_TRY(const synth::JobAllocator allocator, synth::JobAllocatorConfig(job, options));
  const bool allocated = metric == "max_allocated";
  const nonpytorch::NonPytorchMemory none;
  auto outside = [&](int pp_rank) -> const nonpytorch::NonPytorchMemory& {
    const auto r = static_cast<std::size_t>(pp_rank);
    return r < options.non_pytorch.size() ? options.non_pytorch[r] : none;
  };
  // The whole run's peak, or the peak through iteration `after_iterations` (reserved and
  // active stop at an OOM, and then the run never printed that report: the run's peak so far
  // is used).
  auto through = [&](const std::vector<std::int64_t>& v, std::int64_t whole) {
    if (after_iterations <= 0 || v.empty()) return whole;
    return v[std::min<std::size_t>(static_cast<std::size_t>(after_iterations), v.size()) - 1];
  };
  auto value = [&](int pp_rank) -> std::int64_t {
    const synth::AllocatorRun run = synth::SimulateRank(
        synth, pp_rank, allocator.config, allocated ? 0 : options.capacity_bytes, outside(pp_rank));
    if (allocated)
      return through(run.peak_allocated_through_iteration_bytes, run.peak_allocated_bytes);
    if (metric == "peak_active")
      return through(run.peak_active_through_iteration_bytes, run.peak_active_bytes);
    // NVML's per-process figure holds everything the process maps, not the framebuffer the
    // driver keeps for itself.
    const nonpytorch::NonPytorchMemory& o = outside(pp_rank);
    const std::int64_t extra =
        metric == "device_used" ? o.TotalBytes() - o.OutsideProcessBytes() : 0;
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

}  // namespace memtune::assess::internal
