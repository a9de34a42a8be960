// AssessJob: estimate, forecast, verdicts and advice in one call.
#include "memtune/assess/assess.h"

#include <algorithm>

#include "assess/advice.h"
#include "assess/outside.h"
#include "assess/verdict.h"
#include "memtune/alloc/env_config.h"

namespace memtune::assess {
namespace {

// How closely an OOM verdict's shortfall is found (docs/assess.md): 64 MiB, or 1/256 of the
// search range when that is wider, so a search takes at most about eight replays.
constexpr std::int64_t kOomMarginResolutionBytes = std::int64_t{64} << 20;

// The rank with the least headroom decides; the compatibility modes' one rank class
// carries upstream's total.
std::optional<AllocatedFit> FitOf(const estimate::Estimate& e,
                                  const std::vector<nonpytorch::NonPytorchMemory>& outside) {
  if (e.gpu_capacity_bytes <= 0 || e.ranks.empty()) return std::nullopt;
  std::optional<AllocatedFit> best;
  for (std::size_t i = 0; i < e.ranks.size(); ++i) {
    AllocatedFit fit;
    fit.pp_rank = e.ranks[i].pp_rank;
    fit.usable_bytes = e.gpu_capacity_bytes - outside[i].TotalBytes();
    const std::int64_t allocated =
        e.mode == estimate::Mode::kAccurate ? e.ranks[i].allocated_bytes : e.peak_allocated_bytes;
    fit.headroom_bytes = fit.usable_bytes - allocated;
    fit.fits = fit.headroom_bytes >= 0;
    if (!best || fit.headroom_bytes < best->headroom_bytes) best = fit;
  }
  return best;
}

Status CheckOptions(const AssessOptions& o) {
  if (o.iterations < 1 || o.iterations > 100) {
    return InvalidInput("iterations",
                        std::to_string(o.iterations) + " is out of range; allowed: 1 to 100");
  }
  if (!(o.reserved_uncertainty >= 0 && o.reserved_uncertainty <= 1)) {
    return InvalidInput("reserved_uncertainty", std::to_string(o.reserved_uncertainty) +
                                                    " is out of range; allowed: 0 to 1");
  }
  return OkStatus();
}

// An OOM verdict's margin: how much more capacity its deciding rank needs, by bisection
// between the capacity (which runs out) and the unlimited replay's need (which cannot).
Status RefineOomMargins(const model::Job& job, const synth::ForecastOptions& fo,
                        std::vector<ModeVerdict>& verdicts) {
  const bool any_oom = std::any_of(verdicts.begin(), verdicts.end(), [](const ModeVerdict& v) {
    return v.state == VerdictState::kOom;
  });
  if (!any_oom) return OkStatus();
  MEMTUNE_TRY(const auto synth, synth::TraceSynthesizer::Create(job, fo.synth));
  MEMTUNE_TRY(const synth::JobAllocator own, synth::JobAllocatorConfig(job, fo));
  for (ModeVerdict& v : verdicts) {
    if (v.state != VerdictState::kOom) continue;
    const alloc::AllocatorConfig config =
        alloc::WithExpandableSegments(own.config, v.mode == AllocatorMode::kExpandable);
    const std::int64_t unlimited_need = fo.capacity_bytes - v.margin_bytes;  // with non-PyTorch
    const std::int64_t resolution =
        std::max(kOomMarginResolutionBytes, (unlimited_need - fo.capacity_bytes) / 256);
    const std::size_t r = static_cast<std::size_t>(v.pp_rank);
    const nonpytorch::NonPytorchMemory none;
    const std::int64_t fitting = synth::SmallestFittingCapacity(
        synth, v.pp_rank, config, r < fo.non_pytorch.size() ? fo.non_pytorch[r] : none,
        fo.capacity_bytes, unlimited_need, resolution);
    v.margin_bytes = fo.capacity_bytes - fitting;
  }
  return OkStatus();
}

}  // namespace

const ModeVerdict* FindVerdict(const Assessment& a, AllocatorMode mode) {
  for (const ModeVerdict& v : a.verdicts) {
    if (v.mode == mode) return &v;
  }
  return nullptr;
}

Result<alloc::TorchVersion> EffectiveTorchVersion(const model::Job& job,
                                                  const AssessOptions& options) {
  if (options.torch_version) return *options.torch_version;
  const std::string& named = job.memtune.versions.torch;
  if (named.empty()) return alloc::kDefaultTorchVersion;
  return alloc::ParseTorchVersion(named, "memtune.versions.torch");
}

Result<Assessment> AssessJob(const model::Job& job, const AssessOptions& options) {
  MEMTUNE_RETURN_IF_ERROR(CheckOptions(options));
  Assessment a;
  MEMTUNE_TRY(a.estimate, estimate::EstimateMemory(job, options.estimate));
  MEMTUNE_TRY(a.non_pytorch, internal::OutsideMemory(job, a.estimate));
  a.allocated_fit = FitOf(a.estimate, a.non_pytorch);
  if (options.estimate.mode != estimate::Mode::kAccurate || !options.simulate_allocator) return a;
  synth::ForecastOptions fo;
  fo.synth.iterations = options.iterations;
  fo.synth.num_microbatches = options.estimate.num_microbatches;
  fo.capacity_bytes = a.estimate.gpu_capacity_bytes;
  fo.non_pytorch = a.non_pytorch;  // accurate mode: one per pipeline rank, in order
  MEMTUNE_TRY(fo.torch_version, EffectiveTorchVersion(job, options));
  auto forecast = synth::ForecastJob(job, fo);
  if (!forecast) {
    if (forecast.error().code != ErrorCode::kUnsupported) return forecast.error();
    const Error& why = forecast.error();
    a.forecast_note =
        "not simulated: " + why.Describe() + (why.hint.empty() ? "" : "; " + why.hint);
    return a;
  }
  a.forecast = std::move(*forecast);
  a.verdicts = internal::DecideVerdicts(*a.forecast, a.non_pytorch, options.reserved_uncertainty);
  MEMTUNE_RETURN_IF_ERROR(RefineOomMargins(job, fo, a.verdicts));
  a.advice = internal::DecideAdvice(a);
  return a;
}

}  // namespace memtune::assess
