// The page data of a snapshot report: inspect and replay JSON, the recorded timeline of
// one device and its final segments.
#include <utility>

#include "memtune/report/html_report.h"
#include "memtune/report/inspect_report.h"
#include "memtune/report/replay_report.h"
#include "memtune/snapshot/inspect.h"
#include "memtune/snapshot/replay.h"
#include "report/report_data.h"

namespace memtune::report {
namespace {

using nlohmann::ordered_json;

// The first device with a trace, else 0.
int TimelineDevice(const snapshot::Snapshot& s) {
  for (std::size_t d = 0; d < s.device_traces.size(); ++d) {
    if (!s.device_traces[d].empty()) return static_cast<int>(d);
  }
  return 0;
}

// The innermost frame of `stack` ("" when none was recorded).
std::string SiteOf(const snapshot::Snapshot& s, snapshot::StackId stack) {
  if (stack < 0 || static_cast<std::size_t>(stack) >= s.stacks.size() || s.stacks[stack].empty())
    return "";
  const std::int32_t frame = s.stacks[stack].front();
  if (frame < 0 || static_cast<std::size_t>(frame) >= s.frames.size()) return "";
  return snapshot::FormatFrame(s.frames[frame]);
}

// Allocated (requested) and reserved bytes after each entry, from the state at the start.
ordered_json RecordedTimeline(const snapshot::Snapshot& s, int device,
                              const snapshot::TraceSummary& summary) {
  using snapshot::TraceAction;
  std::int64_t allocated = summary.requested_at_start_bytes;
  std::int64_t reserved = summary.reserved_at_start_bytes;
  std::vector<std::int64_t> allocated_series, reserved_series, bytes;
  std::vector<int> action, site;
  StringTable sites, actions;
  ordered_json ooms = ordered_json::array();
  const auto& trace = static_cast<std::size_t>(device) < s.device_traces.size()
                          ? s.device_traces[device]
                          : std::vector<snapshot::TraceEntry>{};
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const snapshot::TraceEntry& e = trace[i];
    switch (e.action) {
      case TraceAction::kAlloc:
        allocated += e.size_bytes;
        break;
      case TraceAction::kFreeCompleted:
        allocated -= e.size_bytes;
        break;
      case TraceAction::kSegmentAlloc:
      case TraceAction::kSegmentMap:
        reserved += e.size_bytes;
        break;
      case TraceAction::kSegmentFree:
      case TraceAction::kSegmentUnmap:
        reserved -= e.size_bytes;
        break;
      case TraceAction::kOom:
        ooms.push_back({{"index", i}, {"bytes", e.size_bytes}, {"device_free_bytes", e.addr}});
        break;
      default:
        break;
    }
    allocated_series.push_back(allocated);
    reserved_series.push_back(reserved);
    bytes.push_back(e.size_bytes);
    action.push_back(actions.Index(snapshot::TraceActionName(e.action)));
    site.push_back(sites.Index(SiteOf(s, e.stack)));
  }
  ordered_json t;
  t["device"] = device;
  t["events"] = trace.size();
  t["allocated_bytes"] = std::move(allocated_series);
  t["modes"] = {{{"mode", s.settings.expandable_segments ? "expandable" : "native"},
                 {"job_config", true},
                 {"recorded", true},
                 {"peak_reserved_bytes", summary.peak_reserved_bytes},
                 {"peak_index", summary.peak_reserved_event},
                 {"oom", ooms.empty() ? ordered_json(nullptr) : ooms.front()},
                 {"reserved_bytes", std::move(reserved_series)}}};
  t["ooms"] = std::move(ooms);
  t["labels"] = {{"action_names", actions.strings()},
                 {"site_names", sites.strings()},
                 {"action", action},
                 {"site", site},
                 {"bytes", bytes}};
  return t;
}

std::vector<MapSegment> FinalSegments(const snapshot::Snapshot& s, int device) {
  std::vector<MapSegment> out;
  for (const snapshot::Segment& seg : s.segments) {
    if (seg.device != device) continue;
    MapSegment m;
    m.address = static_cast<std::uint64_t>(seg.address);
    m.size_bytes = seg.total_size_bytes;
    m.expandable = seg.is_expandable;
    m.small_pool = seg.segment_type == snapshot::PoolType::kSmall;
    for (const snapshot::Block& b : seg.blocks) {
      m.blocks.push_back(
          {b.address - seg.address, b.size_bytes, b.state != snapshot::BlockState::kInactive});
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

Result<std::string> RenderSnapshotReportData(const snapshot::Snapshot& snap,
                                             const std::string& name,
                                             alloc::TorchVersion torch_version) {
  MEMTUNE_TRY(const snapshot::InspectReport inspect, snapshot::Inspect(snap));
  snapshot::ReplayOptions options;
  options.torch_version = torch_version;
  options.alloc_conf =
      snap.settings.expandable_segments ? "expandable_segments:False" : "expandable_segments:True";
  ordered_json data = ReportHead("snapshot", "memtune report: " + name);
  data["inspect"] = EmbedJson(RenderInspectJson(inspect));
  auto replay = snapshot::Replay(snap, options);
  // A snapshot without a trace has nothing to replay: the page shows its state only.
  data["replay"] = replay ? EmbedJson(RenderReplayJson(*replay)) : ordered_json(nullptr);
  const int device = TimelineDevice(snap);
  const snapshot::DeviceInspect* dev = nullptr;
  for (const auto& d : inspect.devices) {
    if (d.device == device) dev = &d;
  }
  data["timeline"] = dev != nullptr && dev->trace.present
                         ? RecordedTimeline(snap, device, dev->trace)
                         : ordered_json(nullptr);
  ordered_json map = SegmentMapJson(FinalSegments(snap, device));
  map["mode"] = snap.settings.expandable_segments ? "expandable" : "native";
  map["at_index"] = -1;  // the snapshot's final state
  data["segments"] = ordered_json::array({std::move(map)});
  return DumpReportData(data);
}

}  // namespace memtune::report
