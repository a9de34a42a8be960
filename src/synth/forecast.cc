// Replays synthesized traces through the allocator simulator (no text round trip: the
// generator's events go straight into alloc::Simulator).
#include "memtune/synth/forecast.h"

#include <algorithm>
#include <utility>

#include "memtune/alloc/env_config.h"
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
      if (const auto& report = sim_.last_oom()) {
        run_.oom_shortfall_bytes = report->allocation_bytes - report->device_free_bytes;
      }
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

}  // namespace

AllocatorRun SimulateRank(const TraceSynthesizer& synth, int pp_rank,
                          const alloc::AllocatorConfig& config, std::int64_t capacity_bytes,
                          std::int64_t non_pytorch_bytes) {
  return Run(synth, pp_rank, config, capacity_bytes, non_pytorch_bytes, nullptr, nullptr);
}

std::int64_t SmallestFittingCapacity(const TraceSynthesizer& synth, int pp_rank,
                                     const alloc::AllocatorConfig& config,
                                     std::int64_t non_pytorch_bytes, std::int64_t oom_bytes,
                                     std::int64_t fits_bytes, std::int64_t resolution_bytes) {
  const std::int64_t step = std::max<std::int64_t>(resolution_bytes, 1);
  while (fits_bytes - oom_bytes > step) {
    const std::int64_t mid = oom_bytes + (fits_bytes - oom_bytes) / 2;
    const AllocatorRun run = Run(synth, pp_rank, config, mid, non_pytorch_bytes, nullptr, nullptr);
    (run.oom ? oom_bytes : fits_bytes) = mid;
  }
  return fits_bytes;
}

Result<JobAllocator> JobAllocatorConfig(const model::Job& job, const ForecastOptions& options) {
  if (options.alloc_conf) {
    auto config = alloc::ParseAllocatorConfig(*options.alloc_conf, options.torch_version);
    if (!config) {
      Error e = config.error();
      e.field = "alloc_conf (" + e.field + ")";
      return e;
    }
    return JobAllocator{std::move(*config), "alloc_conf"};
  }
  MEMTUNE_TRY(
      alloc::EnvAllocatorConfig env,
      alloc::AllocatorConfigFromEnv(job.memtune.env, options.torch_version, "memtune.env."));
  return JobAllocator{std::move(env.config),
                      env.source_var.empty() ? "" : "memtune.env." + env.source_var};
}

Result<Forecast> ForecastJob(const model::Job& job, const ForecastOptions& options) {
  MEMTUNE_TRY(auto synth, TraceSynthesizer::Create(job, options.synth));
  MEMTUNE_TRY(const JobAllocator job_allocator, JobAllocatorConfig(job, options));
  const alloc::AllocatorConfig& own = job_allocator.config;
  const alloc::AllocatorConfig other = alloc::WithExpandableSegments(own, !own.expandable_segments);
  Forecast f;
  f.iterations = options.synth.iterations;
  f.capacity_bytes = options.capacity_bytes;
  f.non_pytorch_bytes = options.non_pytorch_bytes;
  f.torch_version = options.torch_version;
  f.alloc_conf_field = job_allocator.field;
  for (int r = 0; r < synth.num_stages(); ++r) {
    StageForecast st;
    st.pp_rank = r;
    TraceSummary own_summary, other_summary;
    std::string other_event;
    st.own = Run(synth, r, own, options.capacity_bytes, options.non_pytorch_bytes,
                 &st.peak_allocated_event, &own_summary);
    st.other = Run(synth, r, other, options.capacity_bytes, options.non_pytorch_bytes, &other_event,
                   &other_summary);
    st.peak_allocated_bytes = st.own.peak_allocated_bytes;
    st.peak_allocated_through_iteration_bytes = st.own.peak_allocated_through_iteration_bytes;
    TraceSummary summary = own_summary;
    st.own.unlimited_peak_reserved_bytes = st.own.peak_reserved_bytes;
    st.other.unlimited_peak_reserved_bytes = st.other.peak_reserved_bytes;
    if (st.other.oom) {
      st.other.unlimited_peak_reserved_bytes =
          Run(synth, r, other, 0, 0, nullptr, nullptr).peak_reserved_bytes;
    }
    if (st.own.oom && st.other.oom) {  // neither ran to the end: replay without a limit
      const AllocatorRun free_run = Run(synth, r, own, 0, 0, &st.peak_allocated_event, &summary);
      st.own.unlimited_peak_reserved_bytes = free_run.peak_reserved_bytes;
      st.peak_allocated_bytes = free_run.peak_allocated_bytes;
      st.peak_allocated_through_iteration_bytes = free_run.peak_allocated_through_iteration_bytes;
    } else if (st.own.oom) {
      st.own.unlimited_peak_reserved_bytes =
          Run(synth, r, own, 0, 0, nullptr, nullptr).peak_reserved_bytes;
      st.peak_allocated_bytes = st.other.peak_allocated_bytes;
      st.peak_allocated_through_iteration_bytes = st.other.peak_allocated_through_iteration_bytes;
      st.peak_allocated_event = other_event;
      summary = other_summary;
    }
    st.persistent_bytes = summary.persistent_bytes;
    st.events = summary.events;
    f.own_oom = f.own_oom || st.own.oom;
    f.other_oom = f.other_oom || st.other.oom;
    if (f.stages.empty() ||
        st.peak_allocated_bytes > f.stages[f.peak_pp_rank].peak_allocated_bytes) {
      f.peak_pp_rank = r;
    }
    f.stages.push_back(std::move(st));
  }
  return f;
}

}  // namespace memtune::synth
