// Verdict per allocator mode: each rank's margin against the usable memory, the rank with
// the smallest margin decides, and a margin inside the uncertainty band is "at risk".
#include "assess/verdict.h"

#include <cmath>

namespace memtune::assess {

std::string_view AllocatorModeName(AllocatorMode mode) {
  return mode == AllocatorMode::kExpandable ? "expandable" : "native";
}

std::string_view VerdictStateName(VerdictState state) {
  switch (state) {
    case VerdictState::kFits:
      return "fits";
    case VerdictState::kAtRisk:
      return "at_risk";
    case VerdictState::kOom:
      return "oom";
  }
  return "fits";
}

namespace internal {
namespace {

VerdictState StateOf(const synth::AllocatorRun& run, std::int64_t margin, std::int64_t band) {
  if (run.oom) return VerdictState::kOom;
  return margin < band ? VerdictState::kAtRisk : VerdictState::kFits;
}

// Worse states order after better ones; within a state the smaller margin is worse.
bool Worse(VerdictState a, std::int64_t margin_a, VerdictState b, std::int64_t margin_b) {
  if (a != b) return static_cast<int>(a) > static_cast<int>(b);
  return margin_a < margin_b;
}

ModeVerdict Decide(const synth::Forecast& f,
                   const std::vector<nonpytorch::NonPytorchMemory>& non_pytorch, bool own,
                   double uncertainty) {
  ModeVerdict v;
  bool first = true;
  for (const synth::StageForecast& s : f.stages) {
    const synth::AllocatorRun& run = own ? s.own : s.other;
    const std::int64_t need = run.unlimited_peak_reserved_bytes;
    const std::int64_t margin = f.capacity_bytes - s.non_pytorch_bytes - need;
    const double reserved_band = uncertainty * static_cast<double>(need);
    const std::size_t r = static_cast<std::size_t>(s.pp_rank);
    const double outside_band =
        r < non_pytorch.size()
            ? static_cast<double>(non_pytorch[r].HighBytes() - non_pytorch[r].TotalBytes())
            : 0.0;
    const auto band = static_cast<std::int64_t>(
        std::llround(std::sqrt(reserved_band * reserved_band + outside_band * outside_band)));
    const VerdictState state = StateOf(run, margin, band);
    if (!first && !Worse(state, margin, v.state, v.margin_bytes)) continue;
    first = false;
    v.state = state;
    v.margin_bytes = margin;
    v.uncertainty_bytes = band;
    v.non_pytorch_bytes = s.non_pytorch_bytes;
    v.pp_rank = s.pp_rank;
    v.moment = run.oom ? run.oom_event : run.peak_event;
    v.oom_message = run.oom ? run.oom_message : "";
    v.oom_outside_part = run.oom ? run.oom_outside_part : "";
  }
  const synth::AllocatorRun& any = own ? f.stages.front().own : f.stages.front().other;
  v.mode = any.expandable_segments ? AllocatorMode::kExpandable : AllocatorMode::kNative;
  v.job_config = own;
  v.alloc_conf = any.alloc_conf;
  return v;
}

}  // namespace

std::vector<ModeVerdict> DecideVerdicts(
    const synth::Forecast& forecast, const std::vector<nonpytorch::NonPytorchMemory>& non_pytorch,
    double reserved_uncertainty) {
  if (forecast.capacity_bytes <= 0 || forecast.stages.empty()) return {};
  return {Decide(forecast, non_pytorch, true, reserved_uncertainty),
          Decide(forecast, non_pytorch, false, reserved_uncertainty)};
}

}  // namespace internal
}  // namespace memtune::assess
