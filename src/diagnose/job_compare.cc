// Predictions from the job's assessment for the diagnosis.
#include "diagnose/job_compare.h"

#include <algorithm>
#include <cstdlib>

#include "diagnose/rules_internal.h"
#include "memtune/alloc/oom_message.h"

namespace memtune::diagnose {
namespace {

using alloc::FormatSize;

// Observed and predicted allocated memory this close agree.
constexpr double kAgreementFraction = 0.05;
constexpr std::int64_t kExtraSlackBytes = 1LL << 30;  // bytes

const estimate::RankEstimate* PeakRank(const assess::Assessment& a) {
  for (const auto& r : a.estimate.ranks) {
    if (r.pp_rank == a.estimate.peak_pp_rank) return &r;
  }
  return a.estimate.ranks.empty() ? nullptr : &a.estimate.ranks.front();
}

const synth::StageForecast* Stage(const assess::Assessment& a, int pp_rank) {
  if (!a.forecast) return nullptr;
  for (const auto& s : a.forecast->stages) {
    if (s.pp_rank == pp_rank) return &s;
  }
  return nullptr;
}

const synth::AllocatorRun* Run(const synth::StageForecast& s, bool expandable) {
  if (s.own.expandable_segments == expandable) return &s.own;
  if (s.other.expandable_segments == expandable) return &s.other;
  return nullptr;
}

std::string PredictExpandable(const assess::Assessment& a) {
  const assess::ModeVerdict* on = assess::FindVerdict(a, assess::AllocatorMode::kExpandable);
  const assess::ModeVerdict* off = assess::FindVerdict(a, assess::AllocatorMode::kNative);
  if (!on || !off) return "";
  const synth::StageForecast* s = Stage(a, on->pp_rank);
  const synth::AllocatorRun* with = s ? Run(*s, true) : nullptr;
  const synth::AllocatorRun* without = s ? Run(*s, false) : nullptr;
  if (!with || !without) return "";
  return "predicted reserved " + FormatSize(with->unlimited_peak_reserved_bytes) + " instead of " +
         FormatSize(without->unlimited_peak_reserved_bytes) + "; " +
         std::string(assess::VerdictStateName(on->state));
}

std::optional<std::int64_t> LogPeak(const Findings& f, bool reserved) {
  std::optional<std::int64_t> peak;
  for (const auto& log : f.logs) {
    for (const MemorySample& s : log.item.samples) {
      const auto& v = reserved
                          ? (s.max_reserved_bytes ? s.max_reserved_bytes : s.reserved_bytes)
                          : (s.max_allocated_bytes ? s.max_allocated_bytes : s.allocated_bytes);
      if (v) peak = std::max(peak.value_or(0), *v);
    }
  }
  return peak;
}

std::string Attribute(const JobComparison& c) {
  if (!c.observed_allocated_bytes) return "the inputs show no allocated memory to compare with";
  const std::int64_t diff = *c.observed_allocated_bytes - c.predicted_allocated_bytes;
  const double rel = static_cast<double>(std::llabs(diff)) /
                     static_cast<double>(std::max<std::int64_t>(1, c.predicted_allocated_bytes));
  if (c.observed_reserved_bytes && c.predicted_reserved_bytes &&
      *c.observed_reserved_bytes - *c.observed_allocated_bytes >
          *c.predicted_reserved_bytes - c.predicted_allocated_bytes + kExtraSlackBytes) {
    return "the cache holds more reserved-but-unallocated memory than predicted: fragmentation";
  }
  if (rel <= kAgreementFraction) return "allocated memory matches the prediction within 5%";
  if (diff > 0) {
    return "allocated is " + FormatSize(diff) +
           " above the prediction: memory the estimate does not count (unmodelled buffers, "
           "kernels' workspaces, a leak) or a job that differs from the one given";
  }
  return "allocated is " + FormatSize(-diff) +
         " below the prediction: the OOM came before every activation was live";
}

std::string VerdictLine(const assess::ModeVerdict& v) {
  std::string line = std::string(assess::AllocatorModeName(v.mode)) +
                     (v.job_config ? " (the job's)" : "") + ": " +
                     std::string(assess::VerdictStateName(v.state));
  return line + (v.margin_bytes < 0 ? ", short by " + FormatSize(-v.margin_bytes)
                                    : ", " + FormatSize(v.margin_bytes) + " spare");
}

}  // namespace

JobFacts FactsOf(const model::Job& job, const assess::Assessment& a) {
  JobFacts facts;
  if (const auto* r = PeakRank(a)) {
    facts.model_state_bytes = r->model_state_bytes;
    facts.activation_bytes = r->activation_bytes + r->transient_bytes;
  }
  facts.capacity_bytes = a.estimate.gpu_capacity_bytes;
  facts.pipeline_parallel_size = job.model.pipeline_model_parallel_size;
  facts.world_size = job.memtune.world_size;
  const assess::ModeVerdict* native = assess::FindVerdict(a, assess::AllocatorMode::kNative);
  const assess::ModeVerdict* expandable =
      assess::FindVerdict(a, assess::AllocatorMode::kExpandable);
  if (native && expandable) {
    facts.only_expandable_fits = native->state != assess::VerdictState::kFits &&
                                 expandable->state == assess::VerdictState::kFits;
    facts.verdicts = "native: " + std::string(assess::VerdictStateName(native->state)) +
                     ", expandable: " + std::string(assess::VerdictStateName(expandable->state));
  }
  return facts;
}

void PredictFixes(const assess::Assessment& a, std::vector<Fix>& fixes) {
  for (Fix& fix : fixes) {
    if (fix.id == assess::kExpandableSegmentsAdvice) fix.predicted = PredictExpandable(a);
    for (const assess::Advice& advice : a.advice) {
      if (advice.id == fix.id && advice.effect_bytes != 0) fix.effect_bytes = advice.effect_bytes;
    }
  }
}

JobComparison Compare(const assess::Assessment& a, const Findings& f) {
  JobComparison c;
  if (const auto* r = PeakRank(a)) {
    c.predicted_allocated_bytes = r->allocated_bytes;
    c.predicted_model_state_bytes = r->model_state_bytes;
    c.predicted_activation_bytes = r->activation_bytes;
    if (const auto* s = Stage(a, r->pp_rank))
      c.predicted_reserved_bytes = s->own.unlimited_peak_reserved_bytes;
  }
  if (const Sourced<OomText>* m = BestAllocatorMessage(f); m && m->item.allocated_bytes) {
    c.observed_allocated_bytes = m->item.allocated_bytes;
    c.observed_reserved_bytes = m->item.reserved_bytes;
  } else {
    c.observed_allocated_bytes = LogPeak(f, false);
    c.observed_reserved_bytes = LogPeak(f, true);
  }
  c.attribution = Attribute(c);
  for (const assess::ModeVerdict& v : a.verdicts) c.verdicts.push_back(VerdictLine(v));
  return c;
}

}  // namespace memtune::diagnose
