// Playbook fixes priced by the planner.
#include "diagnose/plan_fixes.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "memtune/plan/plan.h"

namespace memtune::diagnose {
namespace {

// The plan's label of the one-lever alternative each fix names (plan/levers.cc).
struct FixLever {
  std::string_view fix_id;
  std::string_view playbook;
};
constexpr FixLever kLevers[] = {
    {"allocator.expandable-segments", "Quick Decision 1: expandable segments"},
    {"peft.lora-sp-regather", "LoRA input re-gather"},
    {"recompute.selective-core-attn", "selective core_attn"},
    {"recompute.mlp", "selective mlp"},
    {"parallel.increase-pp", "more PP (DP halves)"},
    {"offload.optimizer-cpu", "optimizer CPU offload (half)"},
    {"parallel.increase-tp", "more TP (DP halves)"},
};

std::string Priced(const plan::Candidate& c) {
  std::string verdict;
  for (const plan::ModeResult& v : c.verdicts) {
    if (v.mode == c.mode) {
      verdict =
          fmt::format("{} under {} ({:+.2f} GB)", assess::VerdictStateName(v.state),
                      assess::AllocatorModeName(v.mode), static_cast<double>(v.margin_bytes) / 1e9);
    }
  }
  return fmt::format("memtune plan: {:+.1f}% predicted throughput, {}",
                     100 * (c.relative_throughput - 1), verdict);
}

}  // namespace

void AddPlanCosts(const model::Job& job, std::vector<Fix>& fixes) {
  plan::PlanOptions options;
  options.limit = 3;
  options.max_simulations = 6;
  options.max_gpu_factor = 1;
  auto plan = plan::PlanJob(job, options);
  if (!plan || plan->candidates.empty()) return;
  for (Fix& fix : fixes) {
    const auto* lever = std::find_if(std::begin(kLevers), std::end(kLevers),
                                     [&](const FixLever& l) { return l.fix_id == fix.id; });
    if (lever == std::end(kLevers)) continue;
    for (const plan::Candidate& c : plan->candidates) {
      if (c.playbook != lever->playbook) continue;
      fix.predicted += (fix.predicted.empty() ? "" : "; ") + Priced(c);
      break;
    }
  }
  // The fastest fitting change the playbook list does not already hold.
  for (const plan::Candidate& c : plan->candidates) {
    const bool listed = std::any_of(std::begin(kLevers), std::end(kLevers),
                                    [&](const FixLever& l) { return l.playbook == c.playbook; });
    if (listed || c.changes.empty()) continue;
    std::string edits;
    for (const assess::FieldChange& f : c.changes)
      edits += fmt::format("{}{} = {}", edits.empty() ? "" : ", ", f.field, f.value_json);
    fixes.push_back({"plan.best",
                     "the planner's fastest fitting change: " + edits,
                     fmt::format("{:+.1f}% predicted", 100 * (c.relative_throughput - 1)),
                     Priced(c),
                     {}});
    break;
  }
}

}  // namespace memtune::diagnose
