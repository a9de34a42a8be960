// ParseSnapshot: pickle values -> typed Snapshot (layout: docs/allocator.md 8.2-8.6).
#include <unordered_map>

#include "memtune/snapshot/snapshot.h"
#include "snapshot/snapshot_fields.h"
#include "snapshot/snapshot_parser.h"

namespace memtune::snapshot {
namespace {

// Items a conversion may produce beyond the pickle's object count (a margin for tiny files).
constexpr std::int64_t kItemSlack = 4096;

}  // namespace

int Snapshot::device_count() const {
  int n = static_cast<int>(device_traces.size());
  for (const Segment& s : segments) n = std::max(n, s.device + 1);
  return n;
}

const char* TraceActionName(TraceAction action) {
  switch (action) {
    case TraceAction::kAlloc:
      return "alloc";
    case TraceAction::kFreeRequested:
      return "free_requested";
    case TraceAction::kFreeCompleted:
      return "free_completed";
    case TraceAction::kSegmentAlloc:
      return "segment_alloc";
    case TraceAction::kSegmentFree:
      return "segment_free";
    case TraceAction::kSegmentMap:
      return "segment_map";
    case TraceAction::kSegmentUnmap:
      return "segment_unmap";
    case TraceAction::kSnapshot:
      return "snapshot";
    case TraceAction::kOom:
      return "oom";
    case TraceAction::kOther:
      return "other";
  }
  return "other";
}

Result<StackId> SnapshotParser::Stack(PickleValue frames, const Path& path) {
  if (frames.kind() == PickleKind::kNone) return kNoStack;
  if (frames.kind() != PickleKind::kList && frames.kind() != PickleKind::kTuple) {
    return WrongType(path, "list", frames.kind());
  }
  if (frames.size() == 0) return kNoStack;
  if (const StackId* hit = stack_cache_.Find(frames.id())) return *hit;
  auto [it, fresh] = stack_by_node_.try_emplace(frames.id(), 0);
  if (!fresh) {
    stack_cache_.Put(frames.id(), it->second);
    return it->second;
  }
  std::vector<std::int32_t> stack;
  stack.reserve(frames.size());
  for (std::size_t i = 0; i < frames.size(); ++i) {
    Path p(&path, i);
    MEMTUNE_TRY(std::int32_t frame, FrameIndex(frames.at(i), p));
    stack.push_back(frame);
  }
  snapshot_.stacks.push_back(std::move(stack));
  it->second = static_cast<StackId>(snapshot_.stacks.size() - 1);
  stack_cache_.Put(frames.id(), it->second);
  return it->second;
}

Result<std::int32_t> SnapshotParser::FrameIndex(PickleValue frame, const Path& path) {
  auto found = frame_by_node_.find(frame.id());
  if (found != frame_by_node_.end()) return found->second;
  if (frame.kind() != PickleKind::kDict) return WrongType(path, "dict", frame.kind());
  Frame f;
  for (std::size_t i = 0; i < frame.size(); ++i) {
    if (frame.key(i).kind() != PickleKind::kStr) continue;
    const std::string_view key = frame.key(i).AsStr();
    const PickleValue v = frame.value(i);
    if (key == "name" || key == "filename") {
      Path p(&path, key == "name" ? "name" : "filename");
      MEMTUNE_TRY(std::string_view text, ToStr(v, p));
      (key == "name" ? f.name : f.filename) = SanitizeUtf8(text);
    } else if (key == "line") {
      Path p(&path, "line");
      MEMTUNE_TRY(f.line, ToAnyInt(v, p));
    }
  }
  // Frames equal in content but not shared in the pickle become one frame, so sites group.
  auto key = std::make_tuple(f.filename, f.line, f.name);
  auto [it, fresh] = frame_by_content_.try_emplace(std::move(key), 0);
  if (fresh) {
    snapshot_.frames.push_back(std::move(f));
    it->second = static_cast<std::int32_t>(snapshot_.frames.size() - 1);
  }
  frame_by_node_.emplace(frame.id(), it->second);
  return it->second;
}

Result<Snapshot> SnapshotParser::Run(PickleValue root) {
  if (root.kind() == PickleKind::kList) {
    snapshot_.format = SnapshotFormat::kSegmentList;
    Path path("segments");
    MEMTUNE_RETURN_IF_ERROR(Segments(root, path));
    return std::move(snapshot_);
  }
  if (root.kind() != PickleKind::kDict) {
    return InvalidInput("", std::string("not a memory snapshot: the pickle holds a ") +
                                PickleKindName(root.kind()) +
                                ", not a dict with 'segments' or a list of segments");
  }
  const auto segments = root.Find("segments");
  if (!segments) {
    return InvalidInput("", "not a memory snapshot: the top-level dict has no 'segments' key");
  }
  Path seg_path("segments");
  MEMTUNE_RETURN_IF_ERROR(Segments(*segments, seg_path));
  if (const auto traces = root.Find("device_traces")) {
    Path path("device_traces");
    MEMTUNE_RETURN_IF_ERROR(Traces(*traces, path));
  }
  if (const auto settings = root.Find("allocator_settings")) {
    Path path("allocator_settings");
    MEMTUNE_RETURN_IF_ERROR(Settings(*settings, path));
  }
  return std::move(snapshot_);
}

Status SnapshotParser::Spend(std::size_t count, const Path& path) {
  if (static_cast<std::uint64_t>(count) <= static_cast<std::uint64_t>(items_left_)) {
    items_left_ -= static_cast<std::int64_t>(count);
    return OkStatus();
  }
  return InvalidInput(path.str(),
                      "the snapshot converts to more than " + std::to_string(item_budget_) +
                          " segments, blocks and trace entries (the limit: the pickle's " +
                          "object count plus " + std::to_string(kItemSlack) +
                          "); lists or entries shared through the pickle memo are refused",
                      "write the snapshot with torch.cuda.memory._dump_snapshot()");
}

Result<Snapshot> ParseSnapshot(const PickleDocument& document) {
  // PyTorch writes every segment, block and trace entry as its own dict, so a real snapshot
  // never converts to more items than its pickle holds objects; memo references to shared
  // lists would multiply (a 62 KB file into 30 M entries).
  SnapshotParser parser(static_cast<std::int64_t>(document.node_count()) + kItemSlack);
  return parser.Run(document.root());
}

Result<Snapshot> LoadSnapshot(std::string bytes, const SnapshotLimits& limits) {
  if (IsGzip(bytes)) {
    MEMTUNE_TRY(bytes, Gunzip(bytes, limits.max_decompressed_bytes));
  }
  MEMTUNE_TRY(PickleDocument doc, ReadPickle(std::move(bytes), limits.pickle));
  return ParseSnapshot(doc);
}

}  // namespace memtune::snapshot
