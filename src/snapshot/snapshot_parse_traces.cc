// ParseSnapshot, part 2: device traces (allocator.md 8.5) and allocator settings (8.6).
#include <algorithm>
#include <charconv>

#include "snapshot/snapshot_parser.h"

namespace memtune::snapshot {
namespace {

constexpr std::size_t kMaxDevices = 1024;  // entries of device_traces accepted

TraceAction ParseAction(std::string_view s) {
  static constexpr std::pair<std::string_view, TraceAction> kActions[] = {
      {"alloc", TraceAction::kAlloc},
      {"free_requested", TraceAction::kFreeRequested},
      {"free_completed", TraceAction::kFreeCompleted},
      {"segment_alloc", TraceAction::kSegmentAlloc},
      {"segment_free", TraceAction::kSegmentFree},
      {"segment_map", TraceAction::kSegmentMap},
      {"segment_unmap", TraceAction::kSegmentUnmap},
      {"snapshot", TraceAction::kSnapshot},
      {"oom", TraceAction::kOom},
      // PyTorch 2.0 traces wrote "free" for free_requested + free_completed together.
      {"free", TraceAction::kFreeCompleted},
  };
  for (const auto& [name, action] : kActions) {
    if (s == name) return action;
  }
  return TraceAction::kOther;
}

}  // namespace

Status SnapshotParser::Traces(PickleValue list, const Path& path) {
  if (list.kind() != PickleKind::kList) return WrongType(path, "list", list.kind());
  if (list.size() > kMaxDevices) {
    return InvalidInput(path.str(), "lists " + std::to_string(list.size()) + " devices; at most " +
                                        std::to_string(kMaxDevices));
  }
  snapshot_.device_traces.resize(list.size());
  for (std::size_t d = 0; d < list.size(); ++d) {
    Path dp(&path, d);
    const PickleValue trace = list.at(d);
    if (trace.kind() != PickleKind::kList) return WrongType(dp, "list", trace.kind());
    MEMTUNE_RETURN_IF_ERROR(Spend(trace.size(), dp));
    std::vector<TraceEntry>& out = snapshot_.device_traces[d];
    out.reserve(trace.size());
    for (std::size_t i = 0; i < trace.size(); ++i) {
      Path ep(&dp, i);
      MEMTUNE_TRY(TraceEntry e, OneEntry(trace.at(i), ep));
      out.push_back(e);
    }
  }
  return OkStatus();
}

SnapshotParser::EntryKey SnapshotParser::ClassifyEntryKey(PickleValue key) {
  static constexpr std::pair<std::string_view, EntryKey> kKeys[] = {
      {"action", EntryKey::kAction},          {"addr", EntryKey::kAddr},
      {"device_free", EntryKey::kDeviceFree}, {"size", EntryKey::kSize},
      {"stream", EntryKey::kStream},          {"time_us", EntryKey::kTimeUs},
      {"frames", EntryKey::kFrames},
  };
  EntryKey which = EntryKey::kOther;
  for (const auto& [name, k] : kKeys) {
    if (key.AsStr() == name) which = k;
  }
  entry_keys_.Put(key.id(), which);
  return which;
}

TraceAction SnapshotParser::ClassifyAction(PickleValue action) {
  const TraceAction which = ParseAction(action.AsStr());
  actions_.Put(action.id(), which);
  return which;
}

Result<TraceEntry> SnapshotParser::OneEntry(PickleValue dict, const Path& path) {
  if (dict.kind() != PickleKind::kDict) return WrongType(path, "dict", dict.kind());
  TraceEntry e;
  bool has_action = false;
  for (std::size_t i = 0; i < dict.size(); ++i) {
    const PickleValue k = dict.key(i);
    if (k.kind() != PickleKind::kStr) continue;
    const PickleValue v = dict.value(i);
    const EntryKey which = EntryKeyOf(k);
    switch (which) {
      case EntryKey::kAction: {
        Path p(&path, "action");
        if (v.kind() != PickleKind::kStr) return WrongType(p, "str", v.kind());
        e.action = ActionOf(v);
        has_action = true;
        break;
      }
      case EntryKey::kAddr:
      case EntryKey::kDeviceFree: {
        Path p(&path, which == EntryKey::kAddr ? "addr" : "device_free");
        MEMTUNE_TRY(e.addr, ToInt(v, p, 0, kMaxAddress));
        break;
      }
      case EntryKey::kSize: {
        Path p(&path, "size");
        MEMTUNE_TRY(e.size_bytes, ToInt(v, p, 0, kMaxFieldBytes));
        break;
      }
      case EntryKey::kStream: {
        Path p(&path, "stream");
        MEMTUNE_TRY(e.stream, ToAnyInt(v, p));
        break;
      }
      case EntryKey::kTimeUs: {
        Path p(&path, "time_us");
        MEMTUNE_TRY(e.time_us, ToAnyInt(v, p));
        break;
      }
      case EntryKey::kFrames: {
        Path p(&path, "frames");
        MEMTUNE_TRY(e.stack, Stack(v, p));
        break;
      }
      case EntryKey::kOther:
        break;
    }
  }
  if (!has_action) return InvalidInput(path.str(), "missing key 'action'");
  return e;
}

Status SnapshotParser::Settings(PickleValue dict, const Path& path) {
  if (dict.kind() != PickleKind::kDict) return WrongType(path, "dict", dict.kind());
  AllocatorSettings& s = snapshot_.settings;
  s.present = true;
  for (std::size_t i = 0; i < dict.size(); ++i) {
    if (dict.key(i).kind() != PickleKind::kStr) continue;
    const std::string_view key = dict.key(i).AsStr();
    const PickleValue v = dict.value(i);
    if (key == "PYTORCH_CUDA_ALLOC_CONF") {
      Path p(&path, "PYTORCH_CUDA_ALLOC_CONF");
      if (v.kind() == PickleKind::kNone) continue;
      MEMTUNE_TRY(std::string_view conf, ToStr(v, p));
      s.alloc_conf = SanitizeUtf8(conf);
    } else if (key == "max_split_size") {
      Path p(&path, "max_split_size");
      MEMTUNE_TRY(s.max_split_size_bytes, ToAnyInt(v, p));
      if (s.max_split_size_bytes < 0) s.max_split_size_bytes = -1;
    } else if (key == "garbage_collection_threshold") {
      Path p(&path, "garbage_collection_threshold");
      if (v.kind() == PickleKind::kFloat)
        s.garbage_collection_threshold = v.AsFloat();
      else if (v.kind() == PickleKind::kInt)
        s.garbage_collection_threshold = static_cast<double>(v.AsInt());
      else
        return WrongType(p, "float", v.kind());
    } else if (key == "expandable_segments") {
      Path p(&path, "expandable_segments");
      MEMTUNE_TRY(s.expandable_segments, ToBool(v, p));
      s.expandable_segments_recorded = true;
    } else if (key == "release_lock_on_cudamalloc") {
      Path p(&path, "release_lock_on_cudamalloc");
      MEMTUNE_TRY(s.release_lock_on_cudamalloc, ToBool(v, p));
    } else if (key == "roundup_power2_divisions" && v.kind() == PickleKind::kDict) {
      Path p(&path, "roundup_power2_divisions");
      for (std::size_t k = 0; k < v.size(); ++k) {
        Path kp(&p, k);
        MEMTUNE_TRY(std::string_view interval, ToStr(v.key(k), kp));
        MEMTUNE_TRY(std::int64_t divisions, ToInt(v.value(k), kp, 0, 1 << 20));
        std::int64_t mib = 0;
        auto [end, ec] = std::from_chars(interval.data(), interval.data() + interval.size(), mib);
        if (ec != std::errc() || end != interval.data() + interval.size() || mib <= 0) {
          return InvalidInput(kp.str(), "key '" + SanitizeUtf8(interval.substr(0, 20)) +
                                            "' is not an interval start in MiB");
        }
        s.roundup_power2_divisions.emplace_back(mib, divisions);
      }
      std::sort(s.roundup_power2_divisions.begin(), s.roundup_power2_divisions.end());
    }
  }
  return OkStatus();
}

}  // namespace memtune::snapshot
