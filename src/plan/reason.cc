// Candidate reasons: the changed levers and the step-time terms that move most.
#include "plan/reason.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace memtune::plan {
namespace {

struct Short {
  const char* field;
  const char* label;
};
constexpr Short kShort[] = {
    {"memtune.world_size", "GPUs"},
    {"model.tensor_model_parallel_size", "TP"},
    {"model.pipeline_model_parallel_size", "PP"},
    {"model.virtual_pipeline_model_parallel_size", "VPP"},
    {"model.context_parallel_size", "CP"},
    {"model.expert_model_parallel_size", "EP"},
    {"train.micro_batch_size", "MBS"},
};

const char* TermLabel(std::string_view name) {
  static const std::map<std::string_view, const char*> kLabels = {
      {"gemm", "GEMMs"},
      {"attention", "attention"},
      {"elementwise", "element-wise kernels"},
      {"layer_comm_exposed", "exposed TP/CP/EP comm"},
      {"recompute", "recompute"},
      {"host_bound", "CPU-bound dispatch"},
      {"pp_bubble", "pipeline bubble"},
      {"pp_p2p", "pipeline send/recv"},
      {"optimizer", "optimizer step"},
      {"optimizer_offload", "CPU optimizer"},
      {"dp_grad_reduce", "exposed gradient reduction"},
      {"dp_param_gather", "exposed parameter all-gather"},
      {"dp_comm_exposed", "exposed FSDP comm"},
  };
  auto it = kLabels.find(name);
  return it == kLabels.end() ? "other" : it->second;
}

std::string Unquote(const std::string& json) {
  if (json.size() >= 2 && json.front() == '"') return json.substr(1, json.size() - 2);
  return json == "null" ? "none" : json;
}

}  // namespace

std::string DescribeChanges(const std::vector<assess::FieldChange>& changes) {
  std::vector<std::string> parts;
  bool recompute = false;
  for (const assess::FieldChange& c : changes) {
    const auto* s = std::find_if(std::begin(kShort), std::end(kShort),
                                 [&](const Short& x) { return c.field == x.field; });
    if (s != std::end(kShort)) {
      parts.push_back(fmt::format("{} {}", s->label, Unquote(c.value_json)));
    } else if (c.field.rfind("model.recompute", 0) == 0) {
      recompute = true;
    } else if (c.field == "optimizer.optimizer_offload_fraction") {
      parts.push_back("optimizer CPU offload " + c.value_json);
    } else if (c.field == "peft.sequence_parallel_input_regather" && c.value_json == "true") {
      parts.push_back("LoRA input re-gather");
    } else if (c.field == "memtune.env.PYTORCH_CUDA_ALLOC_CONF") {
      parts.push_back(Unquote(c.value_json));
    }
  }
  if (recompute) {
    std::string granularity, modules;
    for (const assess::FieldChange& c : changes) {
      if (c.field == "model.recompute_granularity") granularity = Unquote(c.value_json);
      if (c.field == "model.recompute_modules") modules = c.value_json;
    }
    if (granularity == "none")
      parts.push_back("no recompute");
    else if (modules.empty() || modules == "null")
      parts.push_back("recompute " + granularity);
    else
      parts.push_back("recompute " + modules);
  }
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out.empty() ? "no change" : out;
}

std::string CostReason(const Candidate& current, const Candidate& candidate) {
  if (candidate.changes.empty()) return "the job as it is";
  std::string levers = DescribeChanges(candidate.changes);
  if (current.step.step_time_s <= 0) return levers;  // no baseline to compare with
  const int dp_from = model::DataParallelSize(current.job);
  const int dp_to = model::DataParallelSize(candidate.job);
  if (dp_from != dp_to) levers += fmt::format(", DP {}->{}", dp_from, dp_to);
  // Per-step seconds by term, per GPU: larger means slower.
  std::map<std::string_view, double> delta;
  for (const steptime::StepTerm& t : candidate.step.terms) delta[t.name] += t.seconds;
  for (const steptime::StepTerm& t : current.step.terms) delta[t.name] -= t.seconds;
  std::vector<std::pair<std::string_view, double>> moved(delta.begin(), delta.end());
  std::sort(moved.begin(), moved.end(),
            [](const auto& a, const auto& b) { return std::fabs(a.second) > std::fabs(b.second); });
  const double step = std::max(1e-9, current.step.step_time_s);
  std::string terms;
  int shown = 0;
  for (const auto& [name, seconds] : moved) {
    if (shown == 2 || std::fabs(seconds) < 0.01 * step) break;
    terms += fmt::format("{}{} {:+.3f} s", terms.empty() ? "" : ", ", TermLabel(name), seconds);
    ++shown;
  }
  if (terms.empty()) {
    return levers + (candidate.relative_throughput >= 0.9995
                         ? ": no predicted throughput cost"
                         : ": small changes spread over the step");
  }
  return levers + ": " + terms + " per step";
}

}  // namespace memtune::plan
