// PlanJob: enumerate, check, rank analytically, simulate the best, fall back to more GPUs.
#include "memtune/plan/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "memtune/model/checks.h"
#include "plan/levers.h"
#include "plan/reason.h"

namespace memtune::plan {
namespace {

struct Analytic {
  Levers levers;
  model::Job job;
  steptime::StepTime step;
  std::int64_t headroom_bytes = 0;  // allocated-only headroom of the tightest rank
};

struct SearchResult {
  std::vector<Candidate> fitting;
  std::vector<std::pair<std::string, std::string>> dropped;  // playbook alternatives
  int searched = 0, rejected_by_checks = 0, rejected_by_memory = 0, simulated = 0;
  std::optional<Analytic> closest;  // the candidate with the most headroom, when none fits
};

bool Fits(assess::VerdictState state) { return state != assess::VerdictState::kOom; }

// The assessment the planner simulates a candidate with: both allocator modes.
assess::AssessOptions SimulationOptions(const PlanOptions& options) {
  assess::AssessOptions assess;
  assess.estimate.with_explanations = false;
  assess.iterations = options.iterations;
  return assess;
}

// The candidate `a` as its simulated assessment decides it, in its allocator mode: the job's
// own when it fits there (and is not merely at risk while the other fits), else the other
// one, adding its setting. nullopt when it fits under neither.
std::optional<Candidate> FromAssessment(const model::Job& current, const Analytic& a,
                                        const assess::Assessment& result,
                                        const PlanOptions& options, double current_tps) {
  if (result.verdicts.empty()) return std::nullopt;
  const assess::ModeVerdict* own = nullptr;
  const assess::ModeVerdict* other = nullptr;
  for (const assess::ModeVerdict& v : result.verdicts) (v.job_config ? own : other) = &v;
  if (own == nullptr) return std::nullopt;
  const bool keep_mode = std::find(options.keep.begin(), options.keep.end(),
                                   "memtune.env.PYTORCH_CUDA_ALLOC_CONF") != options.keep.end();
  // The assessment's Quick Decision advice (assess/advice.cc): expandable segments first
  // when fragmentation costs more than the native allocator leaves spare.
  const bool advised = std::any_of(result.advice.begin(), result.advice.end(), [](const auto& x) {
    return x.id == assess::kExpandableSegmentsAdvice;
  });
  const assess::ModeVerdict* chosen = nullptr;
  if (own->state == assess::VerdictState::kFits && advised && !keep_mode && other &&
      other->state == assess::VerdictState::kFits)
    chosen = other;
  else if (own->state == assess::VerdictState::kFits)
    chosen = own;
  else if (!keep_mode && other && other->state == assess::VerdictState::kFits)
    chosen = other;
  else if (Fits(own->state))
    chosen = own;
  else if (!keep_mode && other && Fits(other->state))
    chosen = other;
  if (chosen == nullptr) return std::nullopt;
  Candidate c;
  c.job = a.job;
  if (chosen != own) c.job.memtune.env["PYTORCH_CUDA_ALLOC_CONF"] = chosen->alloc_conf;
  c.changes = JobChanges(current, c.job);
  c.step = a.step;
  c.relative_throughput = current_tps > 0 ? a.step.tokens_per_s_per_gpu / current_tps : 1;
  c.simulated = true;
  c.mode = chosen->mode;
  for (const assess::ModeVerdict& v : result.verdicts) {
    ModeResult r;
    r.mode = v.mode;
    r.state = v.state;
    r.margin_bytes = v.margin_bytes;
    c.verdicts.push_back(r);
  }
  return c;
}

// Simulates `a` (AssessJob with the allocator) and decides it (FromAssessment).
std::optional<Candidate> Simulate(const model::Job& current, const Analytic& a,
                                  const PlanOptions& options, double current_tps) {
  auto result = assess::AssessJob(a.job, SimulationOptions(options));
  if (!result) return std::nullopt;
  return FromAssessment(current, a, *result, options, current_tps);
}

// Checks, predicts and sizes one applied setting; nullopt when the checks refuse it (their
// error rule ids in `refused`, each once) or the step-time model cannot time it (`refused`
// left empty).
std::optional<Analytic> Evaluate(model::Job applied, const Levers& levers, std::string& refused) {
  static const assess::AssessOptions kFast = [] {
    assess::AssessOptions o;
    o.simulate_allocator = false;
    o.estimate.with_explanations = false;
    return o;
  }();
  refused.clear();
  for (const model::Finding& f : model::CheckJob(applied)) {
    if (f.severity == model::Severity::kError && refused.find(f.rule_id) == std::string::npos)
      refused += (refused.empty() ? "" : ", ") + f.rule_id;
  }
  if (!refused.empty()) return std::nullopt;
  Analytic a;
  a.levers = levers;
  a.job = std::move(applied);
  auto step = steptime::PredictStepTime(a.job);
  auto memory = assess::AssessJob(a.job, kFast);
  if (!step || !memory || !memory->allocated_fit) return std::nullopt;
  a.step = *step;
  a.headroom_bytes = memory->allocated_fit->headroom_bytes;
  return a;
}

// `with_alternatives`: also price the playbook's one-lever changes of the job (its own GPU
// count, when the job itself passes the checks).
SearchResult Search(const model::Job& job, int gpus, const PlanOptions& options, double current_tps,
                    bool with_alternatives) {
  SearchResult out;
  const std::vector<RecomputeChoice> recompute = RecomputeChoices(job);
  std::vector<Analytic> ranked;
  std::string refused;
  for (const Levers& levers : EnumerateLevers(job, gpus, options.keep, recompute)) {
    ++out.searched;
    auto a = Evaluate(ApplyLevers(job, levers, gpus, recompute), levers, refused);
    if (!a) {
      ++out.rejected_by_checks;
      continue;
    }
    if (a->headroom_bytes < 0) {
      ++out.rejected_by_memory;
      if (!out.closest || a->headroom_bytes > out.closest->headroom_bytes) out.closest = a;
      continue;
    }
    ranked.push_back(std::move(*a));
  }
  // Best predicted throughput first.
  std::stable_sort(ranked.begin(), ranked.end(), [&](const Analytic& x, const Analytic& y) {
    return x.step.tokens_per_s_per_gpu > y.step.tokens_per_s_per_gpu;
  });
  for (const Analytic& a : ranked) {
    if (static_cast<int>(out.fitting.size()) >= options.limit ||
        out.simulated >= options.max_simulations) {
      break;
    }
    ++out.simulated;
    if (auto c = Simulate(job, a, options, current_tps)) {
      out.fitting.push_back(std::move(*c));
    } else if (!out.closest || a.headroom_bytes > out.closest->headroom_bytes) {
      out.closest = a;
    }
  }
  // The playbook's one-lever alternatives, simulated whatever their rank, so that their
  // predicted costs are on the table (the job's own GPU count only).
  if (with_alternatives) {
    for (const auto& [label, levers] : PlaybookAlternatives(job, gpus, options.keep, recompute)) {
      auto a = Evaluate(ApplyLevers(job, levers, gpus, recompute), levers, refused);
      if (!a) {
        out.dropped.emplace_back(label, refused.empty() ? "the step-time model cannot time it"
                                                        : "refused by the checks: " + refused);
        continue;
      }
      if (a->headroom_bytes < 0) {
        out.dropped.emplace_back(label, "allocated memory alone exceeds the GPU");
        continue;
      }
      ++out.simulated;
      if (auto c = Simulate(job, *a, options, current_tps)) {
        c->playbook = label;
        out.fitting.push_back(std::move(*c));
      } else {
        out.dropped.emplace_back(label, "out of memory under both allocator modes");
      }
    }
  }
  return out;
}

// Removes candidates whose changes repeat an earlier one's (a searched layout that is also
// a playbook alternative keeps the label), then orders: the free fix first, the rest by
// predicted throughput, fewer changes first among equals.
void OrderCandidates(std::vector<Candidate>& candidates) {
  std::vector<Candidate> unique;
  for (Candidate& c : candidates) {
    auto same = std::find_if(unique.begin(), unique.end(), [&](const Candidate& u) {
      return u.changes.size() == c.changes.size() &&
             std::equal(u.changes.begin(), u.changes.end(), c.changes.begin(),
                        [](const assess::FieldChange& a, const assess::FieldChange& b) {
                          return a.field == b.field && a.value_json == b.value_json;
                        });
    });
    if (same == unique.end()) {
      unique.push_back(std::move(c));
    } else if (same->playbook.empty()) {
      same->playbook = c.playbook;
    }
  }
  auto free_fix = [](const Candidate& c) {
    return c.changes.empty() ||
           (c.changes.size() == 1 && c.changes[0].field == "memtune.env.PYTORCH_CUDA_ALLOC_CONF");
  };
  std::stable_sort(unique.begin(), unique.end(), [&](const Candidate& a, const Candidate& b) {
    if (free_fix(a) != free_fix(b)) return free_fix(a);
    if (std::fabs(a.relative_throughput - b.relative_throughput) > 5e-4) {
      return a.relative_throughput > b.relative_throughput;
    }
    return a.changes.size() < b.changes.size();
  });
  candidates = std::move(unique);
}

}  // namespace

Result<Plan> PlanJob(const model::Job& job, const PlanOptions& options) {
  const std::vector<std::string> fields = PlanFieldNames();
  for (const std::string& k : options.keep) {
    if (std::find(fields.begin(), fields.end(), k) == fields.end()) {
      std::string allowed;
      for (const std::string& f : fields) allowed += (allowed.empty() ? "" : ", ") + f;
      return InvalidInput("--keep", "'" + k + "' is not a field the planner changes",
                          "allowed: " + allowed);
    }
  }
  const int gpus = options.gpus.value_or(job.memtune.world_size);
  if (gpus < 1) return InvalidInput("--gpus", "the GPU count must be at least 1");
  Plan plan;
  plan.gpus = gpus;
  plan.current.job = job;
  for (const model::Finding& f : model::CheckJob(job)) {
    if (f.severity == model::Severity::kError &&
        plan.current_invalid.find(f.rule_id) == std::string::npos)
      plan.current_invalid += (plan.current_invalid.empty() ? "" : ", ") + f.rule_id;
  }
  MEMTUNE_RETURN_IF_ERROR(steptime::JobHardwareCheck(job));
  const bool valid = plan.current_invalid.empty();
  std::optional<assess::Assessment> assessed;  // the current job, simulated (valid only)
  if (valid) {
    MEMTUNE_TRY(plan.current.step, steptime::PredictStepTime(job));
    if (auto a = assess::AssessJob(job, SimulationOptions(options)); a) assessed = std::move(*a);
  }
  if (assessed) {
    for (const assess::ModeVerdict& v : assessed->verdicts) {
      plan.current.verdicts.push_back({v.mode, v.state, v.margin_bytes});
      if (v.job_config) plan.current.mode = v.mode;
    }
    plan.current.simulated = !assessed->verdicts.empty();
  }
  const double tps = plan.current.step.tokens_per_s_per_gpu;
  SearchResult found = Search(job, gpus, options, tps, valid && gpus == job.memtune.world_size);
  plan.searched = found.searched;
  plan.rejected_by_checks = found.rejected_by_checks;
  plan.rejected_by_memory = found.rejected_by_memory;
  plan.simulated = found.simulated;
  plan.dropped_alternatives = found.dropped;
  for (int factor = 2; found.fitting.empty() && factor <= options.max_gpu_factor; factor *= 2) {
    SearchResult more = Search(job, gpus * factor, options, tps, false);
    plan.searched += more.searched;
    plan.simulated += more.simulated;
    if (!more.fitting.empty()) {
      plan.nothing_fits = fmt::format(
          "nothing fits on {} GPUs; the smallest GPU count found that fits is {} (candidates "
          "below are for {} GPUs)",
          gpus, gpus * factor, gpus * factor);
      plan.gpus = gpus * factor;
      found = std::move(more);
      break;
    }
    if (more.closest &&
        (!found.closest || more.closest->headroom_bytes > found.closest->headroom_bytes))
      found.closest = more.closest;
  }
  if (found.fitting.empty()) {
    std::string closest;
    if (found.closest) {
      closest = fmt::format(
          "; the closest candidate ({}) still needs {:.2f} GB more per GPU than the {} holds",
          DescribeChanges(JobChanges(job, found.closest->job)),
          std::max<double>(0, -static_cast<double>(found.closest->headroom_bytes)) / 1e9,
          job.memtune.gpu);
    }
    plan.nothing_fits = fmt::format("nothing fits on {} to {} GPUs{}", gpus,
                                    gpus * options.max_gpu_factor, closest);
    return plan;
  }
  // The current layout itself, from its assessment above (the free fix when only the
  // allocator mode changes).
  if (assessed && plan.gpus == job.memtune.world_size) {
    Analytic self;
    self.levers = CurrentLevers(job);
    self.job = job;
    self.step = plan.current.step;
    if (auto c = FromAssessment(job, self, *assessed, options, tps)) {
      c->playbook =
          c->changes.empty() ? "the job as it is" : "Quick Decision 1: expandable segments";
      found.fitting.insert(found.fitting.begin(), std::move(*c));
    }
  }
  if (tps <= 0) {  // no baseline: relative to the fastest candidate
    double best = 0;
    for (const Candidate& c : found.fitting) best = std::max(best, c.step.tokens_per_s_per_gpu);
    for (Candidate& c : found.fitting)
      c.relative_throughput = best > 0 ? c.step.tokens_per_s_per_gpu / best : 1;
  }
  for (Candidate& c : found.fitting) c.reason = CostReason(plan.current, c);
  OrderCandidates(found.fitting);
  plan.candidates = std::move(found.fitting);
  return plan;
}

}  // namespace memtune::plan
