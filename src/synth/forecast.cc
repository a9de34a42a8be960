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

const nonpytorch::NonPytorchMemory& NoOutsideMemory() {
  static const nonpytorch::NonPytorchMemory kNone;
  return kNone;
}

// Whether `moment` has come by event `label` (the first gradient sync is the last
// micro-batch's first backward event; anything after iteration 0 is past every moment).
bool Reached(nonpytorch::Moment moment, const EventLabel& label, int last_microbatch) {
  if (label.iteration > 0) return true;
  switch (moment) {
    case nonpytorch::Moment::kStartup:
      return true;
    case nonpytorch::Moment::kFirstForward:
      return label.phase != Phase::kStartup;
    case nonpytorch::Moment::kFirstGradSync:
      return label.phase == Phase::kOptimizer || label.phase == Phase::kZeroGrad ||
             (label.phase == Phase::kBackward && label.microbatch >= last_microbatch);
    case nonpytorch::Moment::kFirstOptimizerStep:
      return label.phase == Phase::kOptimizer || label.phase == Phase::kZeroGrad;
  }
  return true;
}

class SimulatorSink : public EventSink {
 public:
  SimulatorSink(alloc::Simulator& sim, AllocatorRun& run,
                const nonpytorch::NonPytorchMemory& outside, int last_microbatch,
                const ReplayObserver* observer)
      : sim_(sim),
        run_(run),
        outside_(outside),
        last_microbatch_(last_microbatch),
        observer_(observer) {}
  // The parts of the memory outside PyTorch due by `label`; false when one does not fit in
  // what the device has free (an OOM outside PyTorch: NCCL cannot use cached blocks).
  bool TakeOutsideMemory(const EventLabel& label) {
    while (next_part_ < outside_.parts.size() &&
           Reached(outside_.parts[next_part_].moment, label, last_microbatch_)) {
      const nonpytorch::Part& part = outside_.parts[next_part_++];
      if (!part.in_process) continue;  // already out of the capacity (Run)
      const std::int64_t free = sim_.DeviceFreeBytes();
      if (part.bytes > free) {
        run_.oom = true;
        run_.oom_outside_part = part.name;
        run_.oom_event = part.name + " at " + nonpytorch::MomentName(part.moment) + ", " +
                         FormatLabel(label) + " (" + std::to_string(part.bytes) + " bytes)";
        run_.oom_message = part.key == "nccl"
                               ? "NCCL WARN Failed to CUDA calloc async " +
                                     std::to_string(part.bytes) + " bytes (" + part.name +
                                     "): out of memory; " + std::to_string(free) +
                                     " bytes free outside PyTorch's reserved memory"
                               : part.name + ": out of memory allocating " +
                                     std::to_string(part.bytes) + " bytes outside PyTorch";
        run_.oom_shortfall_bytes = part.bytes - free;
        return false;
      }
      outside_bytes_ += part.bytes;
      sim_.SetNonPytorchBytes(outside_bytes_);
    }
    return true;
  }
  bool OnEvent(const SynthEvent& e) override {
    while (iteration_ < e.label.iteration) CloseIteration();
    if (next_part_ < outside_.parts.size() && !TakeOutsideMemory(e.label)) return false;
    if (e.op == EventOp::kFree) {
      sim_.Free(e.handle);
      return Observe(e);
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
    return Observe(e);
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
  bool Observe(const SynthEvent& e) {
    const std::int64_t index = events_++;
    return observer_ == nullptr || (*observer_)(index, e, sim_);
  }

  alloc::Simulator& sim_;
  AllocatorRun& run_;
  const nonpytorch::NonPytorchMemory& outside_;
  int last_microbatch_ = 0;
  std::size_t next_part_ = 0;       // the first part not yet taken
  std::int64_t outside_bytes_ = 0;  // taken so far
  EventLabel peak_label_, allocated_label_;
  int iteration_ = 0;  // the iteration whose events arrive now
  const ReplayObserver* observer_ = nullptr;
  std::int64_t events_ = 0;  // events carried out so far
};

AllocatorRun Run(const TraceSynthesizer& synth, int pp_rank, const alloc::AllocatorConfig& config,
                 std::int64_t capacity, const nonpytorch::NonPytorchMemory& outside,
                 std::string* allocated_event, TraceSummary* summary,
                 const ReplayObserver* observer = nullptr) {
  alloc::SimulatorOptions so;
  so.config = config;
  // The simulator's capacity is CUDA's (cudaMemGetInfo total, what PyTorch's OOM message
  // prints): the driver's reserve is no process's memory.
  so.capacity_bytes = capacity > 0 ? capacity - outside.OutsideProcessBytes() : kNoLimitBytes;
  alloc::Simulator sim(so);
  AllocatorRun run;
  run.alloc_conf = config.settings;
  run.expandable_segments = config.expandable_segments;
  SimulatorSink sink(sim, run, capacity > 0 ? outside : NoOutsideMemory(), synth.last_microbatch(),
                     observer);
  // The start-up parts are there before the first allocation.
  if (!sink.TakeOutsideMemory(EventLabel{})) {
    sink.CloseIteration();
    return run;
  }
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
                          const nonpytorch::NonPytorchMemory& outside) {
  return Run(synth, pp_rank, config, capacity_bytes, outside, nullptr, nullptr);
}

AllocatorRun SimulateRankObserved(const TraceSynthesizer& synth, int pp_rank,
                                  const alloc::AllocatorConfig& config, std::int64_t capacity_bytes,
                                  const nonpytorch::NonPytorchMemory& outside,
                                  const ReplayObserver& observer) {
  return Run(synth, pp_rank, config, capacity_bytes, outside, nullptr, nullptr, &observer);
}

std::int64_t SmallestFittingCapacity(const TraceSynthesizer& synth, int pp_rank,
                                     const alloc::AllocatorConfig& config,
                                     const nonpytorch::NonPytorchMemory& outside,
                                     std::int64_t oom_bytes, std::int64_t fits_bytes,
                                     std::int64_t resolution_bytes) {
  const std::int64_t step = std::max<std::int64_t>(resolution_bytes, 1);
  while (fits_bytes - oom_bytes > step) {
    const std::int64_t mid = oom_bytes + (fits_bytes - oom_bytes) / 2;
    const AllocatorRun run = Run(synth, pp_rank, config, mid, outside, nullptr, nullptr);
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
  f.torch_version = options.torch_version;
  f.alloc_conf_field = job_allocator.field;
  for (int r = 0; r < synth.num_stages(); ++r) {
    StageForecast st;
    st.pp_rank = r;
    const nonpytorch::NonPytorchMemory& outside =
        static_cast<std::size_t>(r) < options.non_pytorch.size() ? options.non_pytorch[r]
                                                                 : NoOutsideMemory();
    st.non_pytorch_bytes = outside.TotalBytes();
    TraceSummary own_summary, other_summary;
    std::string other_event;
    st.own =
        Run(synth, r, own, options.capacity_bytes, outside, &st.peak_allocated_event, &own_summary);
    st.other = Run(synth, r, other, options.capacity_bytes, outside, &other_event, &other_summary);
    st.peak_allocated_bytes = st.own.peak_allocated_bytes;
    st.peak_allocated_through_iteration_bytes = st.own.peak_allocated_through_iteration_bytes;
    TraceSummary summary = own_summary;
    st.own.unlimited_peak_reserved_bytes = st.own.peak_reserved_bytes;
    st.other.unlimited_peak_reserved_bytes = st.other.peak_reserved_bytes;
    if (st.other.oom) {
      st.other.unlimited_peak_reserved_bytes =
          Run(synth, r, other, 0, NoOutsideMemory(), nullptr, nullptr).peak_reserved_bytes;
    }
    if (st.own.oom && st.other.oom) {  // neither ran to the end: replay without a limit
      const AllocatorRun free_run =
          Run(synth, r, own, 0, NoOutsideMemory(), &st.peak_allocated_event, &summary);
      st.own.unlimited_peak_reserved_bytes = free_run.peak_reserved_bytes;
      st.peak_allocated_bytes = free_run.peak_allocated_bytes;
      st.peak_allocated_through_iteration_bytes = free_run.peak_allocated_through_iteration_bytes;
    } else if (st.own.oom) {
      st.own.unlimited_peak_reserved_bytes =
          Run(synth, r, own, 0, NoOutsideMemory(), nullptr, nullptr).peak_reserved_bytes;
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
