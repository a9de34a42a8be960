// The page data of a job report: the estimate and plan JSON, and the timeline and segment
// map of one rank replayed under both allocator modes (synth::SimulateRankObserved).
#include <algorithm>
#include <array>
#include <utility>

#include "memtune/alloc/env_config.h"
#include "memtune/report/html_report.h"
#include "memtune/report/plan_report.h"
#include "memtune/synth/forecast.h"
#include "report/report_data.h"

namespace memtune::report {
namespace {

using nlohmann::ordered_json;

// One replay's counters per event, and where its reserved memory peaked.
struct ModeSeries {
  assess::AllocatorMode mode = assess::AllocatorMode::kNative;
  bool job_config = false;
  std::vector<std::int64_t> allocated_bytes, reserved_bytes;
  std::int64_t peak_index = -1;  // first event at the peak reserved
  std::int64_t peak_reserved_bytes = 0;
  synth::AllocatorRun run;
  std::vector<MapSegment> segments;  // at peak_index
};

// The label columns of the events, one entry per event.
struct EventColumns {
  std::vector<int> phase, iteration, layer, tensor, op;
  std::vector<std::int64_t> bytes;
  StringTable tensors;
  void Add(const synth::SynthEvent& e) {
    phase.push_back(static_cast<int>(e.label.phase));
    iteration.push_back(e.label.iteration);
    layer.push_back(e.label.layer);
    tensor.push_back(tensors.Index(e.label.tensor));
    op.push_back(e.op == synth::EventOp::kAlloc ? 0 : 1);
    bytes.push_back(e.bytes);
  }
  std::size_t size() const { return phase.size(); }
};

std::vector<MapSegment> MapOf(const alloc::Simulator& sim) {
  std::vector<MapSegment> out;
  for (const alloc::SegmentInfo& s : sim.Segments()) {
    MapSegment m;
    m.address = s.address;
    m.size_bytes = s.total_size_bytes;
    m.expandable = s.is_expandable;
    m.small_pool = s.pool == alloc::PoolKind::kSmall;
    for (const alloc::BlockInfo& b : s.blocks) {
      m.blocks.push_back({static_cast<std::int64_t>(b.address - s.address), b.size_bytes,
                          b.state != alloc::BlockState::kFree});
    }
    out.push_back(std::move(m));
  }
  return out;
}

// Replays `rank` under `config` twice: the counters of every event (and the labels, as far
// as `columns` does not hold them yet), then up to the reserved peak for the segment map.
ModeSeries ReplayMode(const synth::TraceSynthesizer& synth, int rank,
                      const alloc::AllocatorConfig& config, std::int64_t capacity_bytes,
                      const nonpytorch::NonPytorchMemory& outside, EventColumns& columns) {
  ModeSeries m;
  m.mode = config.expandable_segments ? assess::AllocatorMode::kExpandable
                                      : assess::AllocatorMode::kNative;
  const synth::ReplayObserver record = [&](std::int64_t index, const synth::SynthEvent& e,
                                           const alloc::Simulator& sim) {
    const alloc::DeviceStats& s = sim.stats();
    m.allocated_bytes.push_back(s.allocated_bytes[0].current);
    m.reserved_bytes.push_back(s.reserved_bytes[0].current);
    if (s.reserved_bytes[0].current > m.peak_reserved_bytes) {
      m.peak_reserved_bytes = s.reserved_bytes[0].current;
      m.peak_index = index;
    }
    if (static_cast<std::size_t>(index) >= columns.size()) columns.Add(e);
    return true;
  };
  m.run = synth::SimulateRankObserved(synth, rank, config, capacity_bytes, outside, record);
  const synth::ReplayObserver at_peak = [&](std::int64_t index, const synth::SynthEvent&,
                                            const alloc::Simulator& sim) {
    if (index < m.peak_index) return true;
    m.segments = MapOf(sim);
    return false;
  };
  if (m.peak_index >= 0) {
    synth::SimulateRankObserved(synth, rank, config, capacity_bytes, outside, at_peak);
  }
  return m;
}

// Iteration starts and phase runs: [{"index", "label"}], [{"start", "phase"}].
void AddMarkers(const EventColumns& c, ordered_json& timeline) {
  ordered_json iterations = ordered_json::array(), phases = ordered_json::array();
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (i == 0 || c.iteration[i] != c.iteration[i - 1]) {
      iterations.push_back({{"index", i}, {"label", "iter " + std::to_string(c.iteration[i])}});
    }
    if (i == 0 || c.phase[i] != c.phase[i - 1]) {
      phases.push_back(
          {{"start", i}, {"phase", synth::PhaseName(static_cast<synth::Phase>(c.phase[i]))}});
    }
  }
  timeline["iterations"] = std::move(iterations);
  timeline["phases"] = std::move(phases);
}

ordered_json LabelsJson(const EventColumns& c) {
  ordered_json phase_names = ordered_json::array();
  for (int p = 0; p <= static_cast<int>(synth::Phase::kZeroGrad); ++p) {
    phase_names.push_back(synth::PhaseName(static_cast<synth::Phase>(p)));
  }
  return {{"phase_names", phase_names},
          {"tensor_names", c.tensors.strings()},
          {"phase", c.phase},
          {"iteration", c.iteration},
          {"layer", c.layer},
          {"tensor", c.tensor},
          {"op", c.op},
          {"bytes", c.bytes}};
}

ordered_json ModeJson(const ModeSeries& m) {
  ordered_json j;
  j["mode"] = assess::AllocatorModeName(m.mode);
  j["job_config"] = m.job_config;
  j["alloc_conf"] = m.run.alloc_conf;
  j["peak_reserved_bytes"] = m.peak_reserved_bytes;
  j["peak_index"] = m.peak_index;
  j["oom"] = m.run.oom ? ordered_json{{"index", m.reserved_bytes.size()},
                                      {"event", m.run.oom_event},
                                      {"message", m.run.oom_message}}
                       : ordered_json(nullptr);
  j["reserved_bytes"] = m.reserved_bytes;
  return j;
}

int TimelineRank(const assess::Assessment& a) {
  if (!a.verdicts.empty()) return a.verdicts.front().pp_rank;
  return a.forecast->peak_pp_rank;
}

Result<std::pair<ordered_json, ordered_json>> TimelineAndSegments(const JobReportInput& in) {
  const assess::Assessment& a = *in.assessment;
  synth::SynthOptions so;
  so.iterations = in.options.iterations;
  so.num_microbatches = in.options.estimate.num_microbatches;
  MEMTUNE_TRY(auto synth, synth::TraceSynthesizer::Create(*in.job, so));
  synth::ForecastOptions fo;
  MEMTUNE_TRY(fo.torch_version, assess::EffectiveTorchVersion(*in.job, in.options));
  MEMTUNE_TRY(const synth::JobAllocator own, synth::JobAllocatorConfig(*in.job, fo));
  const int rank = TimelineRank(a);
  const nonpytorch::NonPytorchMemory outside = static_cast<std::size_t>(rank) < a.non_pytorch.size()
                                                   ? a.non_pytorch[rank]
                                                   : nonpytorch::NonPytorchMemory{};
  const std::int64_t capacity = a.forecast->capacity_bytes;
  EventColumns columns;
  std::array<ModeSeries, 2> modes = {
      ReplayMode(synth, rank, own.config, capacity, outside, columns),
      ReplayMode(synth, rank,
                 alloc::WithExpandableSegments(own.config, !own.config.expandable_segments),
                 capacity, outside, columns)};
  modes[0].job_config = true;
  if (modes[0].mode != assess::AllocatorMode::kNative) std::swap(modes[0], modes[1]);
  const ModeSeries& longer =
      modes[0].allocated_bytes.size() >= modes[1].allocated_bytes.size() ? modes[0] : modes[1];
  ordered_json t;
  t["rank"] = rank;
  t["events"] = columns.size();
  t["capacity_bytes"] = capacity;
  t["non_pytorch_bytes"] = outside.TotalBytes();
  t["usable_bytes"] = capacity > 0 ? capacity - outside.TotalBytes() : 0;
  t["allocated_bytes"] = longer.allocated_bytes;
  t["modes"] = {ModeJson(modes[0]), ModeJson(modes[1])};
  AddMarkers(columns, t);
  t["labels"] = LabelsJson(columns);
  ordered_json segments;
  for (const ModeSeries& m : modes) {
    ordered_json map = SegmentMapJson(m.segments);
    map["mode"] = assess::AllocatorModeName(m.mode);
    map["at_index"] = m.peak_index;
    segments.push_back(std::move(map));
  }
  return std::make_pair(std::move(t), std::move(segments));
}

}  // namespace

Result<std::string> RenderJobReportData(const JobReportInput& input) {
  const std::string& name = input.context.job_name.empty() ? "job" : input.context.job_name;
  ordered_json data = ReportHead("job", "memtune report: " + name);
  data["estimate"] = EmbedJson(RenderEstimateJson(*input.assessment, input.context));
  data["plan"] =
      input.plan != nullptr ? EmbedJson(RenderPlanJson(*input.plan)) : ordered_json(nullptr);
  data["timeline"] = nullptr;
  data["segments"] = nullptr;
  if (input.assessment->forecast && !input.assessment->forecast->stages.empty()) {
    MEMTUNE_TRY(auto parts, TimelineAndSegments(input));
    data["timeline"] = std::move(parts.first);
    data["segments"] = std::move(parts.second);
  }
  return DumpReportData(data);
}

}  // namespace memtune::report
