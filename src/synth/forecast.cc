// Replays synthesized traces through the allocator simulator (no text round trip: the
// generator's events go straight into alloc::Simulator).
#include "memtune/synth/forecast.h"

#include <utility>

#include "memtune/alloc/simulator.h"
#include "memtune/core/units.h"

namespace memtune::synth {
namespace {

constexpr std::int64_t kNoLimitBytes = kMaxDeviceBytes;  // "no capacity limit"

class SimulatorSink : public EventSink {
 public:
  SimulatorSink(alloc::Simulator& sim, AllocatorRun& run) : sim_(sim), run_(run) {}
  bool OnEvent(const SynthEvent& e) override {
    while (iteration_ < e.label.iteration) CloseIteration();
    if (e.op == EventOp::kFree) {
      sim_.Free(e.handle);
      return true;
    }
    const alloc::AllocResult r = sim_.Alloc(e.handle, e.bytes, e.stream);
    if (r.status == alloc::AllocStatus::kOutOfMemory) {
      run_.oom = true;
      run_.oom_event = FormatLabel(e.label) + " (" + std::to_string(e.bytes) + " bytes)";
      run_.oom_message = sim_.LastOomMessage();
      return false;
    }
    const alloc::DeviceStats& s = sim_.stats();
    const std::int64_t reserved = s.reserved_bytes[0].current;
    const std::int64_t allocated = s.allocated_bytes[0].current;
    if (reserved > run_.peak_reserved_bytes) {
      run_.peak_reserved_bytes = reserved;
      run_.unallocated_at_peak_bytes = reserved - allocated;
      peak_label_ = e.label;
    }
    if (allocated > run_.peak_allocated_bytes) {
      run_.peak_allocated_bytes = allocated;
      allocated_label_ = e.label;
    }
    return true;
  }
  const EventLabel& peak_label() const { return peak_label_; }
  // Records the simulator's peaks (PyTorch's never-reset counters) as those through the
  // current iteration; events come in iteration order, start-up in iteration 0. Called when
  // the next iteration's first event arrives (the trailing zero_grad closes the last one)
  // and, at the end, for an iteration an OOM cut short.
  void CloseIteration() {
    const alloc::DeviceStats& s = sim_.stats();
    run_.peak_allocated_through_iteration_bytes.push_back(s.allocated_bytes[0].peak);
    run_.peak_reserved_through_iteration_bytes.push_back(s.reserved_bytes[0].peak);
    run_.peak_active_through_iteration_bytes.push_back(s.active_bytes[0].peak);
    ++iteration_;
  }
  const EventLabel& allocated_label() const { return allocated_label_; }
  int iteration() const { return iteration_; }

 private:
  alloc::Simulator& sim_;
  AllocatorRun& run_;
  EventLabel peak_label_, allocated_label_;
  int iteration_ = 0;  // the iteration whose events arrive now
};

AllocatorRun Run(const TraceSynthesizer& synth, int pp_rank, const alloc::AllocatorConfig& config,
                 std::int64_t capacity, std::int64_t non_pytorch, std::string* allocated_event,
                 TraceSummary* summary) {
  alloc::SimulatorOptions so;
  so.config = config;
  so.capacity_bytes = capacity > 0 ? capacity : kNoLimitBytes;
  so.non_pytorch_bytes = capacity > 0 ? non_pytorch : 0;
  alloc::Simulator sim(so);
  AllocatorRun run;
  run.alloc_conf = config.settings;
  run.expandable_segments = config.expandable_segments;
  SimulatorSink sink(sim, run);
  const TraceSummary s = synth.Synthesize(pp_rank, sink);
  if (summary != nullptr) *summary = s;
  run.peak_event = FormatLabel(sink.peak_label());
  run.peak_active_bytes = sim.stats().active_bytes[0].peak;
  if (allocated_event != nullptr) *allocated_event = FormatLabel(sink.allocated_label());
  // One entry per iteration synthesized (fewer after an OOM).
  if (sink.iteration() < synth.iterations()) sink.CloseIteration();
  return run;
}

// The same config in the other segment mode, and the string a user would set for it.
alloc::AllocatorConfig OtherMode(const alloc::AllocatorConfig& own) {
  alloc::AllocatorConfig other = own;
  other.expandable_segments = !own.expandable_segments;
  if (other.expandable_segments) {
    other.settings = own.settings.empty() ? "expandable_segments:True" : own.settings + ",expandable_segments:True";
  } else {
    other.settings = own.settings;
    for (const char* on : {"expandable_segments:True", "expandable_segments:true", "expandable_segments:1"}) {
      const auto at = other.settings.find(on);
      if (at != std::string::npos) other.settings.replace(at, std::string(on).size(), "expandable_segments:False");
    }
  }
  return other;
}

}  // namespace

std::pair<std::string, std::string> JobAllocConf(const model::Job& job) {
  // PyTorch >= 2.9 reads PYTORCH_ALLOC_CONF first, then the older PYTORCH_CUDA_ALLOC_CONF
  // (c10/core/AllocatorConfig.cpp); earlier releases read only the CUDA one.
  for (const char* var : {"PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"}) {
    auto it = job.memtune.env.find(var);
    if (it != job.memtune.env.end()) return {it->second, std::string("memtune.env.") + var};
  }
  return {"", ""};
}

AllocatorRun SimulateRank(const TraceSynthesizer& synth, int pp_rank, const alloc::AllocatorConfig& config,
                          std::int64_t capacity_bytes, std::int64_t non_pytorch_bytes) {
  return Run(synth, pp_rank, config, capacity_bytes, non_pytorch_bytes, nullptr, nullptr);
}

Result<alloc::AllocatorConfig> JobAllocatorConfig(const model::Job& job, const ForecastOptions& options) {
  auto [text, field] = JobAllocConf(job);
  if (options.alloc_conf) {
    text = *options.alloc_conf;
    field = "alloc_conf";
  }
  auto config = alloc::ParseAllocatorConfig(text, options.torch_version);
  if (!config) {
    Error e = config.error();
    if (!field.empty()) e.field = field + " (" + e.field + ")";
    return e;
  }
  return config;
}

Result<Forecast> ForecastJob(const model::Job& job, const ForecastOptions& options) {
  MEMTUNE_TRY(auto synth, TraceSynthesizer::Create(job, options.synth));
  MEMTUNE_TRY(const alloc::AllocatorConfig own, JobAllocatorConfig(job, options));
  const alloc::AllocatorConfig other = OtherMode(own);
  Forecast f;
  f.iterations = options.synth.iterations;
  f.capacity_bytes = options.capacity_bytes;
  f.non_pytorch_bytes = options.non_pytorch_bytes;
  f.torch_version = options.torch_version;
  for (int r = 0; r < synth.num_stages(); ++r) {
    StageForecast st;
    st.pp_rank = r;
    TraceSummary own_summary, other_summary;
    std::string other_event;
    st.own = Run(synth, r, own, options.capacity_bytes, options.non_pytorch_bytes, &st.peak_allocated_event,
                 &own_summary);
    st.other = Run(synth, r, other, options.capacity_bytes, options.non_pytorch_bytes, &other_event,
                   &other_summary);
    st.peak_allocated_bytes = st.own.peak_allocated_bytes;
    st.peak_allocated_through_iteration_bytes = st.own.peak_allocated_through_iteration_bytes;
    TraceSummary summary = own_summary;
    if (st.own.oom && st.other.oom) {  // neither ran to the end: replay without a limit
      const AllocatorRun free_run = Run(synth, r, own, 0, 0, &st.peak_allocated_event, &summary);
      st.peak_allocated_bytes = free_run.peak_allocated_bytes;
      st.peak_allocated_through_iteration_bytes = free_run.peak_allocated_through_iteration_bytes;
    } else if (st.own.oom) {
      st.peak_allocated_bytes = st.other.peak_allocated_bytes;
      st.peak_allocated_through_iteration_bytes = st.other.peak_allocated_through_iteration_bytes;
      st.peak_allocated_event = other_event;
      summary = other_summary;
    }
    st.persistent_bytes = summary.persistent_bytes;
    st.events = summary.events;
    f.own_oom = f.own_oom || st.own.oom;
    f.other_oom = f.other_oom || st.other.oom;
    if (f.stages.empty() || st.peak_allocated_bytes > f.stages[f.peak_pp_rank].peak_allocated_bytes) {
      f.peak_pp_rank = r;
    }
    f.stages.push_back(std::move(st));
  }
  return f;
}

}  // namespace memtune::synth
