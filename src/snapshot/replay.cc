// Replay: per device, a check under the recorded settings and, when asked, a what-if under
// another PYTORCH_CUDA_ALLOC_CONF (allocator.md section 10).
#include "memtune/snapshot/replay.h"

#include <bit>

#include "memtune/alloc/policy.h"
#include "memtune/core/units.h"
#include "snapshot/replay_device.h"

namespace memtune::snapshot {
namespace {

// The recorded settings as an AllocatorConfig: the settings string, then the typed values
// PyTorch wrote next to it (they win: the string may have come from PYTORCH_ALLOC_CONF).
Result<alloc::AllocatorConfig> RecordedConfig(const AllocatorSettings& s,
                                              alloc::TorchVersion version) {
  auto parsed = alloc::ParseAllocatorConfig(s.alloc_conf, version);
  if (!parsed) {
    Error e = parsed.error();
    e.field = "allocator_settings.PYTORCH_CUDA_ALLOC_CONF (" + e.field + ")";
    return e;
  }
  alloc::AllocatorConfig c = *parsed;
  if (!s.present) return c;
  if (s.expandable_segments_recorded) c.expandable_segments = s.expandable_segments;
  if (s.max_split_size_bytes >= 0) c.max_split_size_bytes = s.max_split_size_bytes;
  c.garbage_collection_threshold = s.garbage_collection_threshold;
  for (const auto& [mib, divisions] : s.roundup_power2_divisions) {
    const int index = std::bit_width(static_cast<std::uint64_t>(mib)) - 1;
    if (index >= 0 && index < alloc::kRoundupIntervals)
      c.roundup_power2_divisions[static_cast<std::size_t>(index)] = divisions;
  }
  return c;
}

std::int64_t DeviceReserved(const Snapshot& snapshot, int device) {
  std::int64_t total = 0;
  for (const Segment& seg : snapshot.segments) {
    if (seg.device == device) total += seg.total_size_bytes;
  }
  return total;
}

// Peak reserved and the first OOM, from the trace alone. Returns reserved at the start.
std::int64_t Recorded(const Snapshot& snapshot, int device, RecordedOutcome& out) {
  const auto& trace = snapshot.device_traces[static_cast<std::size_t>(device)];
  std::int64_t net = 0, peak = 0;
  for (const TraceEntry& e : trace) {
    if (e.action == TraceAction::kSegmentAlloc || e.action == TraceAction::kSegmentMap)
      net += e.size_bytes;
    if (e.action == TraceAction::kSegmentFree || e.action == TraceAction::kSegmentUnmap)
      net -= e.size_bytes;
    peak = std::max(peak, net);
  }
  const std::int64_t start = std::max<std::int64_t>(0, DeviceReserved(snapshot, device) - net);
  out.peak_reserved_bytes = start + peak;
  std::int64_t reserved = start;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const TraceEntry& e = trace[i];
    if (e.action == TraceAction::kSegmentAlloc || e.action == TraceAction::kSegmentMap)
      reserved += e.size_bytes;
    if (e.action == TraceAction::kSegmentFree || e.action == TraceAction::kSegmentUnmap)
      reserved -= e.size_bytes;
    if (e.action == TraceAction::kOom && !out.oom) {
      out.oom = true;
      out.oom_event_index = static_cast<std::int64_t>(i);
      out.oom_request_bytes = e.size_bytes;
      out.oom_device_free_bytes = e.addr;
      out.oom_reserved_bytes = reserved;
    }
  }
  return start;
}

Result<DeviceReplay> ReplayDevice(const Snapshot& snapshot, int device,
                                  const ReplayOptions& options) {
  DeviceReplay out;
  out.device = device;
  const std::int64_t start = Recorded(snapshot, device, out.recorded);
  if (options.capacity_bytes) {
    out.capacity_bytes = options.capacity_bytes;
    out.capacity_source = "--capacity";
  } else if (out.recorded.oom) {
    // cudaMemGetInfo free at the OOM + what PyTorch held then = what PyTorch could use.
    out.capacity_bytes = out.recorded.oom_device_free_bytes + out.recorded.oom_reserved_bytes;
    out.capacity_source = "recorded OOM at entry " + std::to_string(out.recorded.oom_event_index);
  } else if (const RetryBound bound = FindRetryBound(
                 snapshot, snapshot.device_traces[static_cast<std::size_t>(device)], start);
             bound.upper_bytes > 0) {
    // cudaMalloc failed there, so less than `upper` was available; at least the recorded
    // peak was. The simulator refuses what certainly did not fit.
    out.capacity_bytes = bound.upper_bytes - 1;
    out.capacity_lower_bound_bytes = out.recorded.peak_reserved_bytes;
    out.capacity_source = "OOM-retry release at entry " + std::to_string(bound.event_index) +
                          ": cudaMalloc of " + FormatBytesBinary(bound.failed_segment_bytes) +
                          " failed with " + FormatBytesBinary(bound.reserved_at_failure_bytes) +
                          " reserved";
  } else {
    out.capacity_source = "unlimited";
  }
  MEMTUNE_TRY(alloc::AllocatorConfig own, RecordedConfig(snapshot.settings, options.torch_version));
  DeviceReplayerOptions own_options{own, true, out.capacity_bytes, start};
  DeviceReplayer own_replay(snapshot, device, own_options);
  own_replay.Run(out);
  out.recorded.oom_reserved_unallocated_bytes = own_replay.recorded_oom_unallocated;
  out.alloc_conf = own.settings;
  out.expandable_segments = own.expandable_segments;
  if (!options.alloc_conf) return out;

  MEMTUNE_TRY(alloc::AllocatorConfig other,
              alloc::ParseAllocatorConfig(*options.alloc_conf, options.torch_version));
  DeviceReplay what_if;
  DeviceReplayer replayer(snapshot, device,
                          DeviceReplayerOptions{other, false, out.capacity_bytes, start});
  replayer.Run(what_if);
  out.own_settings = false;
  out.alloc_conf = other.settings;
  out.expandable_segments = other.expandable_segments;
  out.replayed = what_if.replayed;
  if (what_if.rebuilt_start) {
    out.notes.push_back(
        "what-if: the allocations made before the trace started were rebuilt under " +
        std::string(other.settings.empty() ? "the default settings" : other.settings));
  }
  for (const std::string& note : what_if.notes) {
    if (std::find(out.notes.begin(), out.notes.end(), note) == out.notes.end())
      out.notes.push_back(note);
  }
  return out;
}

}  // namespace

Result<ReplayReport> Replay(const Snapshot& snapshot, const ReplayOptions& options) {
  ReplayReport report;
  for (std::size_t d = 0; d < snapshot.device_traces.size(); ++d) {
    if (snapshot.device_traces[d].empty()) continue;
    MEMTUNE_TRY(DeviceReplay device, ReplayDevice(snapshot, static_cast<int>(d), options));
    report.devices.push_back(std::move(device));
  }
  if (report.devices.empty()) {
    return InvalidInput("device_traces", "the snapshot has no trace to replay",
                        "record one with torch.cuda.memory._record_memory_history()");
  }
  return report;
}

}  // namespace memtune::snapshot
