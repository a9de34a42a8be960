// Reserved memory and the OOM verdict in the estimate reports (docs/synth.md).
#include "report/estimate_allocator.h"

#include <fmt/format.h>

#include "memtune/core/units.h"

namespace memtune::report::internal {
namespace {

using nlohmann::ordered_json;

std::string Gb(std::int64_t bytes) { return fmt::format("{:.2f}", static_cast<double>(bytes) / 1e9); }

std::string ModeName(const synth::AllocatorRun& run) {
  return run.expandable_segments ? "expandable" : "native";
}

std::string ConfText(const synth::AllocatorRun& run) {
  return run.alloc_conf.empty() ? "PYTORCH_CUDA_ALLOC_CONF unset" : "PYTORCH_CUDA_ALLOC_CONF=" + run.alloc_conf;
}

// The first stage that OOMs under `own` (true) or `other` (false), or -1.
int FirstOom(const synth::Forecast& f, bool own) {
  for (const auto& s : f.stages) {
    if ((own ? s.own : s.other).oom) return s.pp_rank;
  }
  return -1;
}

// Smallest margin to the usable memory over the stages (capacity - non-PyTorch - reserved).
std::int64_t Spare(const synth::Forecast& f, bool own) {
  std::int64_t spare = f.capacity_bytes;
  for (const auto& s : f.stages) {
    spare = std::min(spare, f.capacity_bytes - f.non_pytorch_bytes - (own ? s.own : s.other).peak_reserved_bytes);
  }
  return spare;
}

void AppendRow(std::string& out, const char* name, const synth::Forecast& f,
               std::string (*cell)(const synth::StageForecast&)) {
  out += fmt::format("{:<26}", name);
  for (const auto& s : f.stages) out += fmt::format(" {:>9}", cell(s));
  out += "\n";
}

void AppendVerdict(std::string& out, const synth::Forecast& f, bool own) {
  const synth::AllocatorRun& first = own ? f.stages.front().own : f.stages.front().other;
  const int rank = FirstOom(f, own);
  out += fmt::format("{} ({}): ", ModeName(first), ConfText(first));
  if (rank < 0) {
    out += fmt::format("fits, {} GB to spare on the tightest rank\n", Gb(Spare(f, own)));
    return;
  }
  const synth::AllocatorRun& run = own ? f.stages[rank].own : f.stages[rank].other;
  out += fmt::format("OOM on pipeline rank {} at {}\n", rank, run.oom_event);
  out += fmt::format("  torch.OutOfMemoryError: {}\n", run.oom_message);
}

}  // namespace

void AppendForecastText(std::string& out, const estimate::Estimate& e, const synth::Forecast& f) {
  if (f.stages.empty()) return;
  out += fmt::format("\nallocator: replay of start-up + {} iterations per rank (PyTorch {} caching allocator)\n",
                     f.iterations, f.torch_version.ToString());
  out += fmt::format("{:<26}", "GB (1e9)");
  for (const auto& s : f.stages) out += fmt::format(" {:>9}", fmt::format("rank {}", s.pp_rank));
  out += "\n";
  AppendRow(out, "peak allocated (trace)", f, [](const synth::StageForecast& s) { return Gb(s.peak_allocated_bytes); });
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
  auto reserved = [](const synth::AllocatorRun& r) { return r.oom ? std::string("OOM") : Gb(r.peak_reserved_bytes); };
  auto unallocated = [](const synth::AllocatorRun& r) { return r.oom ? std::string("-") : Gb(r.unallocated_at_peak_bytes); };
  const std::string own_name = "reserved, " + ModeName(f.stages.front().own) + " (job)";
  const std::string other_name = "reserved, " + ModeName(f.stages.front().other);
  out += fmt::format("{:<26}", own_name);
  for (const auto& s : f.stages) out += fmt::format(" {:>9}", reserved(s.own));
  out += fmt::format("\n{:<26}", other_name);
  for (const auto& s : f.stages) out += fmt::format(" {:>9}", reserved(s.other));
  out += fmt::format("\n{:<26}", own_expandable ? "unallocated, expandable" : "unallocated, native");
  for (const auto& s : f.stages) out += fmt::format(" {:>9}", unallocated(s.own));
  out += fmt::format("\n{:<26}", own_expandable ? "unallocated, native" : "unallocated, expandable");
  for (const auto& s : f.stages) out += fmt::format(" {:>9}", unallocated(s.other));
  out += "\n";
  const synth::StageForecast& peak = f.stages[f.peak_pp_rank];
  out += fmt::format("peak allocated: pipeline rank {}, {} GB at {} (estimator: {} GB)\n", peak.pp_rank,
                     Gb(peak.peak_allocated_bytes), peak.peak_allocated_event, Gb(e.peak_allocated_bytes));
  if (f.iterations > 1) {
    out += "through iteration 1: the peak a memory report after the first step prints, such as Megatron's "
           "\"(after 1 iterations)\" (optimizer state is created at that step)\n";
  }
  if (f.capacity_bytes <= 0) {
    out += "verdict: unknown (no GPU given: set memtune.gpu or memtune.gpu_memory_bytes)\n";
    return;
  }
  out += fmt::format("verdict against {} GB usable ({} GB capacity - {} GB CUDA context and non-PyTorch):\n",
                     Gb(f.capacity_bytes - f.non_pytorch_bytes), Gb(f.capacity_bytes), Gb(f.non_pytorch_bytes));
  out += "  ";
  AppendVerdict(out, f, true);
  out += "  ";
  AppendVerdict(out, f, false);
  const bool native_oom = own_expandable ? f.other_oom : f.own_oom;
  const bool expandable_oom = own_expandable ? f.own_oom : f.other_oom;
  if (native_oom && !expandable_oom) {
    out += "advice: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True first: the native allocator runs out "
           "of memory from fragmentation while expandable segments fit (memory-tuning playbook, Quick "
           "Decision step 1)\n";
  } else if (!native_oom && !expandable_oom && !own_expandable) {
    // Both fit and the job runs native: say so when fragmentation costs more than the
    // native allocator leaves free, the playbook's "close to the memory limit" (Quick
    // Decision step 1).
    const std::int64_t native_spare = Spare(f, /*own=*/true);  // (the job runs native here)
    const std::int64_t expandable_spare = Spare(f, /*own=*/false);
    if (expandable_spare - native_spare > native_spare) {  // fragmentation > what is left
      out += fmt::format(
          "advice: fragmentation costs more than the native allocator leaves free ({} GB spare, {} GB with "
          "expandable segments): set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True first, at no throughput "
          "cost (memory-tuning playbook, Quick Decision step 1)\n",
          Gb(native_spare), Gb(expandable_spare));
    }
  } else if (native_oom && expandable_oom) {
    out += "advice: the job does not fit even with expandable segments: add recompute, raise PP, or shard "
           "more (memory-tuning playbook, Quick Decision steps 3-4)\n";
  }
}

void AddForecastJson(ordered_json& j, const estimate::Estimate& e, const synth::Forecast& f) {
  if (f.stages.empty()) return;
  (void)e;
  const int rank = j["peak"]["pp_rank"].get<int>();
  const synth::StageForecast& s = f.stages[rank < static_cast<int>(f.stages.size()) ? rank : f.peak_pp_rank];
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
