// Plan renderers: text and memtune.plan/1 JSON.
#include "memtune/report/plan_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace memtune::report {
namespace {

using nlohmann::ordered_json;

std::string Layout(const model::Job& j) {
  const model::ModelConfig& m = j.model;
  std::string out =
      fmt::format("TP{} PP{}", m.tensor_model_parallel_size, m.pipeline_model_parallel_size);
  if (m.virtual_pipeline_model_parallel_size)
    out += fmt::format(" VPP{}", *m.virtual_pipeline_model_parallel_size);
  if (m.context_parallel_size > 1) out += fmt::format(" CP{}", m.context_parallel_size);
  if (m.expert_model_parallel_size > 1) out += fmt::format(" EP{}", m.expert_model_parallel_size);
  out += fmt::format(" DP{}, MBS {}", model::DataParallelSize(j), j.train.micro_batch_size);
  return out;
}

std::string Verdicts(const plan::Candidate& c) {
  if (!c.simulated) return "not simulated";
  std::string out;
  for (const plan::ModeResult& v : c.verdicts) {
    out +=
        fmt::format("{}{}{} {} {:+.2f} GB", out.empty() ? "" : " | ", v.mode == c.mode ? "*" : "",
                    assess::AllocatorModeName(v.mode), assess::VerdictStateName(v.state),
                    static_cast<double>(v.margin_bytes) / 1e9);
  }
  return out;
}

std::string Predicted(const plan::Candidate& c) {
  const int world = c.job.memtune.world_size;
  return fmt::format("{:.0f} tokens/s/GPU, {:.3f} s/step, {:.1f} TFLOP/s/GPU (causal)",
                     c.step.tokens_per_s_per_gpu, c.step.step_time_s,
                     c.step.TflopsPerGpu(steptime::FlopsFormula::kCausal, world));
}

ordered_json PredictedJson(const plan::Candidate& c) {
  const int world = c.job.memtune.world_size;
  ordered_json j;
  j["step_time_s"] = c.step.step_time_s;
  j["tokens_per_s_per_gpu"] = c.step.tokens_per_s_per_gpu;
  j["tflops_per_gpu_causal"] = c.step.TflopsPerGpu(steptime::FlopsFormula::kCausal, world);
  j["mfu_causal"] = c.step.Mfu(steptime::FlopsFormula::kCausal, world);
  j["critical_pp_rank"] = c.step.critical_pp_rank;
  ordered_json terms = ordered_json::object();
  for (const steptime::StepTerm& t : c.step.terms) terms[std::string(t.name)] = t.seconds;
  j["terms_s"] = terms;
  return j;
}

ordered_json VerdictJson(const plan::Candidate& c) {
  ordered_json j = ordered_json::object();
  for (const plan::ModeResult& v : c.verdicts) {
    j[std::string(assess::AllocatorModeName(v.mode))] = {
        {"state", std::string(assess::VerdictStateName(v.state))},
        {"margin_bytes", v.margin_bytes}};
  }
  return j;
}

}  // namespace

std::string RenderPlanText(const plan::Plan& plan, const std::string& job_name) {
  const plan::Candidate& now = plan.current;
  std::string out = fmt::format("memtune plan: {} on {} x {}\n", job_name,
                                now.job.memtune.world_size, now.job.memtune.gpu);
  if (plan.current_invalid.empty()) {
    out += fmt::format("current: {}\n  predicted: {}\n  verdict: {}\n", Layout(now.job),
                       Predicted(now), Verdicts(now));
  } else {
    out += fmt::format(
        "current: {}: does not pass the checks ({}; 'memtune check' says why); throughput "
        "below is relative to the fastest candidate\n",
        Layout(now.job), plan.current_invalid);
  }
  out += fmt::format(
      "\nsearched {} candidates on {} GPUs: {} rejected by the checks, {} by allocated memory "
      "alone; {} simulated\n",
      plan.searched, plan.gpus, plan.rejected_by_checks, plan.rejected_by_memory, plan.simulated);
  if (!plan.nothing_fits.empty()) out += "\n" + plan.nothing_fits + "\n";
  if (plan.candidates.empty()) return out;
  out += plan.current_invalid.empty()
             ? "\nranked by predicted throughput (change vs the current job's prediction):\n"
             : "\nranked by predicted throughput (change vs the fastest candidate):\n";
  int rank = 0;
  for (const plan::Candidate& c : plan.candidates) {
    out +=
        fmt::format("\n{:>2}. {:+.1f}%  {}  [{}]{}\n", ++rank, 100 * (c.relative_throughput - 1),
                    Layout(c.job), Verdicts(c), c.playbook.empty() ? "" : "  (" + c.playbook + ")");
    out += fmt::format("    predicted: {}\n", Predicted(c));
    if (c.changes.empty()) {
      out += "    changes: none\n";
    } else {
      for (const assess::FieldChange& f : c.changes)
        out += fmt::format("    set {} = {}\n", f.field, f.value_json);
    }
    out += "    why: " + c.reason + "\n";
  }
  if (!plan.dropped_alternatives.empty()) {
    out += "\nplaybook alternatives left out:\n";
    for (const auto& [label, why] : plan.dropped_alternatives)
      out += fmt::format("  {}: {}\n", label, why);
  }
  out +=
      "\n(* the allocator mode a candidate is ranked under; margins are usable memory minus "
      "the simulated peak reserved of the tightest rank; throughput from docs/step-time.md)\n";
  return out;
}

std::string RenderPlanJson(const plan::Plan& plan) {
  ordered_json j;
  j["schema"] = "memtune.plan/1";
  j["gpus"] = plan.gpus;
  ordered_json current;
  current["layout"] = Layout(plan.current.job);
  if (plan.current_invalid.empty()) {
    current["verdict"] = VerdictJson(plan.current);
    current["predicted"] = PredictedJson(plan.current);
  } else {
    current["check_errors"] = plan.current_invalid;
  }
  j["current"] = current;
  j["candidates"] = ordered_json::array();
  int rank = 0;
  for (const plan::Candidate& c : plan.candidates) {
    ordered_json row;
    row["rank"] = ++rank;
    ordered_json changes = ordered_json::array();
    for (const assess::FieldChange& f : c.changes) {
      changes.push_back({{"field", f.field}, {"value", ordered_json::parse(f.value_json)}});
    }
    row["changes"] = changes;
    row["layout"] = Layout(c.job);
    row["mode"] = std::string(assess::AllocatorModeName(c.mode));
    row["verdict"] = VerdictJson(c);
    row["predicted"] = PredictedJson(c);
    row["relative_throughput"] = c.relative_throughput;
    row["change_pct"] = 100 * (c.relative_throughput - 1);
    row["reason"] = c.reason;
    row["playbook"] = c.playbook.empty() ? ordered_json() : ordered_json(c.playbook);
    j["candidates"].push_back(row);
  }
  j["search"] = {{"searched", plan.searched},
                 {"rejected_by_checks", plan.rejected_by_checks},
                 {"rejected_by_memory", plan.rejected_by_memory},
                 {"simulated", plan.simulated}};
  ordered_json dropped = ordered_json::array();
  for (const auto& [label, why] : plan.dropped_alternatives)
    dropped.push_back({{"playbook", label}, {"why", why}});
  j["dropped_alternatives"] = dropped;
  j["nothing_fits"] = plan.nothing_fits.empty() ? ordered_json() : ordered_json(plan.nothing_fits);
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace memtune::report
