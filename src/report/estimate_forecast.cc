// Reserved memory and the OOM verdict in the estimate reports (docs/synth.md).
#include "report/estimate_forecast.h"

#include <fmt/format.h>

#include "memtune/core/units.h"

namespace memtune::report::internal {
namespace {

using nlohmann::ordered_json;

std::string Gb(std::int64_t bytes) {
  return fmt::format("{:.2f}", static_cast<double>(bytes) / 1e9);
}

std::string ModeName(const synth::AllocatorRun& run) {
  return run.expandable_segments ? "expandable" : "native";
}

void AppendRow(std::string& out, const char* name, const synth::Forecast& f,
               std::string (*cell)(const synth::StageForecast&)) {
  out += fmt::format("{:<26}", name);
  for (const auto& s : f.stages) out += fmt::format(" {:>9}", cell(s));
  out += "\n";
}

std::string ConfText(const assess::ModeVerdict& v) {
  return v.alloc_conf.empty() ? "PYTORCH_CUDA_ALLOC_CONF unset"
                              : "PYTORCH_CUDA_ALLOC_CONF=" + v.alloc_conf;
}

void AppendVerdict(std::string& out, const assess::ModeVerdict& v) {
  out += fmt::format("  {} ({}): ", assess::AllocatorModeName(v.mode), ConfText(v));
  switch (v.state) {
    case assess::VerdictState::kFits:
      out += fmt::format("fits, {} GB to spare on the tightest rank\n", Gb(v.margin_bytes));
      return;
    case assess::VerdictState::kAtRisk:
      out += fmt::format(
          "at risk, {} GB to spare on pipeline rank {}, within the prediction's {} GB uncertainty "
          "(at {})\n",
          Gb(v.margin_bytes), v.pp_rank, Gb(v.uncertainty_bytes), v.moment);
      return;
    case assess::VerdictState::kOom:
      out += fmt::format("OOM on pipeline rank {} at {}, {} GB short\n", v.pp_rank, v.moment,
                         Gb(-v.margin_bytes));
      if (v.oom_outside_part.empty()) {
        out += fmt::format("  torch.OutOfMemoryError: {}\n", v.oom_message);
      } else {
        out += fmt::format("  {}\n", v.oom_message);
      }
      return;
  }
}

}  // namespace

void AppendForecastText(std::string& out, const assess::Assessment& a, const synth::Forecast& f) {
  const estimate::Estimate& e = a.estimate;
  if (f.stages.empty()) return;
  out += fmt::format(
      "\nallocator: replay of start-up + {} iterations per rank (PyTorch {} caching allocator)\n",
      f.iterations, f.torch_version.ToString());
  out += fmt::format("{:<26}", "GB (1e9)");
  for (const auto& s : f.stages) out += fmt::format(" {:>9}", fmt::format("rank {}", s.pp_rank));
  out += "\n";
  AppendRow(out, "peak allocated (trace)", f,
            [](const synth::StageForecast& s) { return Gb(s.peak_allocated_bytes); });
  // Megatron-LM and Bridge print "(after N iterations) memory" with the never-reset peak:
  // show the trace's peak through each earlier iteration, next to the whole run's.
  for (int i = 0; i + 1 < f.iterations; ++i) {
    out += fmt::format("{:<26}", fmt::format("  through iteration {}", i + 1));
    for (const auto& s : f.stages) {
      const auto& v = s.peak_allocated_through_iteration_bytes;
      out += fmt::format(" {:>9}", i < static_cast<int>(v.size()) ? Gb(v[i]) : std::string("-"));
    }
    out += "\n";
  }
  const bool own_expandable = f.stages.front().own.expandable_segments;
  auto reserved = [](const synth::AllocatorRun& r) {
    return r.oom ? std::string("OOM") : Gb(r.peak_reserved_bytes);
  };
  auto unallocated = [](const synth::AllocatorRun& r) {
    return r.oom ? std::string("-") : Gb(r.unallocated_at_peak_bytes);
  };
  const std::string own_name = "reserved, " + ModeName(f.stages.front().own) + " (job)";
  const std::string other_name = "reserved, " + ModeName(f.stages.front().other);
  out += fmt::format("{:<26}", own_name);
  for (const auto& s : f.stages) out += fmt::format(" {:>9}", reserved(s.own));
  out += fmt::format("\n{:<26}", other_name);
  for (const auto& s : f.stages) out += fmt::format(" {:>9}", reserved(s.other));
  out +=
      fmt::format("\n{:<26}", own_expandable ? "unallocated, expandable" : "unallocated, native");
  for (const auto& s : f.stages) out += fmt::format(" {:>9}", unallocated(s.own));
  out +=
      fmt::format("\n{:<26}", own_expandable ? "unallocated, native" : "unallocated, expandable");
  for (const auto& s : f.stages) out += fmt::format(" {:>9}", unallocated(s.other));
  out += "\n";
  const synth::StageForecast& peak = f.stages[f.peak_pp_rank];
  out += fmt::format("peak allocated: pipeline rank {}, {} GB at {} (estimator: {} GB)\n",
                     peak.pp_rank, Gb(peak.peak_allocated_bytes), peak.peak_allocated_event,
                     Gb(e.peak_allocated_bytes));
  if (f.iterations > 1) {
    out +=
        "through iteration 1: the peak a memory report after the first step prints, such as "
        "Megatron's "
        "\"(after 1 iterations)\" (optimizer state is created at that step)\n";
  }
  if (f.capacity_bytes <= 0) {
    out += "verdict: unknown (no GPU given: set memtune.gpu or memtune.gpu_memory_bytes)\n";
    return;
  }
  out += fmt::format(
      "verdict against {} GB capacity, less each rank's memory outside PyTorch as it appears:\n",
      Gb(f.capacity_bytes));
  for (const assess::ModeVerdict& v : a.verdicts) AppendVerdict(out, v);
  for (const assess::Advice& advice : a.advice) {
    out +=
        fmt::format("advice: {} (memory-tuning playbook, {})\n", advice.text, advice.playbook_step);
  }
}

ordered_json VerdictJson(const assess::Assessment& a) {
  ordered_json j = ordered_json::object();
  for (assess::AllocatorMode mode :
       {assess::AllocatorMode::kNative, assess::AllocatorMode::kExpandable}) {
    const assess::ModeVerdict* v = assess::FindVerdict(a, mode);
    if (v == nullptr) continue;
    ordered_json o;
    o["state"] = assess::VerdictStateName(v->state);
    o["margin_bytes"] = v->margin_bytes;
    o["pp_rank"] = v->pp_rank;
    o["moment"] = v->moment;
    o["uncertainty_bytes"] = v->uncertainty_bytes;
    o["non_pytorch_bytes"] = v->non_pytorch_bytes;
    o["alloc_conf"] = v->alloc_conf;
    o["job_config"] = v->job_config;
    j[std::string(assess::AllocatorModeName(mode))] = o;
  }
  return j;
}

ordered_json AdviceJson(const assess::Assessment& a) {
  ordered_json list = ordered_json::array();
  for (const assess::Advice& advice : a.advice) {
    ordered_json o;
    o["id"] = advice.id;
    o["playbook_step"] = advice.playbook_step;
    ordered_json changes = ordered_json::object();
    for (const assess::FieldChange& c : advice.changes)
      changes[c.field] = ordered_json::parse(c.value_json);
    o["changes"] = changes;
    o["effect_bytes"] = advice.effect_bytes;
    o["text"] = advice.text;
    list.push_back(o);
  }
  return list;
}

void AddForecastJson(ordered_json& j, const synth::Forecast& f) {
  if (f.stages.empty()) return;
  const int rank = j["peak"]["pp_rank"].get<int>();
  const synth::StageForecast& s =
      f.stages[rank < static_cast<int>(f.stages.size()) ? rank : f.peak_pp_rank];
  auto run_json = [](const synth::AllocatorRun& r) {
    ordered_json o;
    o["alloc_conf"] = r.alloc_conf;
    o["expandable_segments"] = r.expandable_segments;
    o["reserved_bytes"] = r.peak_reserved_bytes;
    o["oom"] = r.oom;
    o["unallocated_at_peak_bytes"] = r.unallocated_at_peak_bytes;
    o["peak_event"] = r.peak_event;
    if (r.oom) {
      o["oom_event"] = r.oom_event;
      o["oom_message"] = r.oom_message;
    }
    return o;
  };
  j["peak"]["trace_allocated_bytes"] = s.peak_allocated_bytes;
  j["peak"]["reserved_bytes"] = s.own.peak_reserved_bytes;
  j["peak"]["oom"] = f.own_oom;
  j["peak"]["alternative_allocator"] = {{"alloc_conf", s.other.alloc_conf},
                                        {"expandable_segments", s.other.expandable_segments},
                                        {"reserved_bytes", s.other.peak_reserved_bytes},
                                        {"oom", f.other_oom}};
  ordered_json a;
  a["torch_version"] = f.torch_version.ToString();
  a["iterations"] = f.iterations;
  a["stages"] = ordered_json::array();
  for (const auto& st : f.stages) {
    ordered_json o;
    o["pp_rank"] = st.pp_rank;
    o["peak_allocated_bytes"] = st.peak_allocated_bytes;
    o["peak_allocated_event"] = st.peak_allocated_event;
    o["peak_allocated_through_iteration_bytes"] = st.peak_allocated_through_iteration_bytes;
    o["persistent_bytes"] = st.persistent_bytes;
    o["events"] = st.events;
    o["own"] = run_json(st.own);
    o["other"] = run_json(st.other);
    a["stages"].push_back(o);
  }
  j["allocator"] = a;
}

}  // namespace memtune::report::internal
