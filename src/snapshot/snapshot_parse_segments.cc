// ParseSnapshot, part 1: segments and blocks (allocator.md 8.3, 8.4; legacy "history"
// blocks of PyTorch 1.13-2.0 have no "address" and carry [{addr, real_size, frames}]).
#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "snapshot/snapshot_parser.h"

namespace memtune::snapshot {
namespace {

constexpr int kMaxDevice = 1023;  // device indexes accepted

Result<BlockState> ParseState(std::string_view s, const Path& path) {
  if (s == "active_allocated") return BlockState::kActiveAllocated;
  // "active_awaiting_free" is the docstring's spelling of the emitted "active_pending_free".
  if (s == "active_pending_free" || s == "active_awaiting_free") {
    return BlockState::kActivePendingFree;
  }
  if (s == "inactive") return BlockState::kInactive;
  return InvalidInput(path.str(), std::string("'").append(SanitizeUtf8(s.substr(0, 40))) +
                                      "' is not a block state; allowed: active_allocated, "
                                      "active_pending_free, inactive");
}

}  // namespace

Status SnapshotParser::Segments(PickleValue list, const Path& path) {
  if (list.kind() != PickleKind::kList) return WrongType(path, "list", list.kind());
  MEMTUNE_RETURN_IF_ERROR(Spend(list.size(), path));
  snapshot_.segments.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    Path p(&path, i);
    MEMTUNE_RETURN_IF_ERROR(OneSegment(list.at(i), p));
  }
  return CheckOverlaps(path);
}

// Device memory ranges are disjoint: a segment listed twice (or two that overlap) would
// count its memory twice in every total.
Status SnapshotParser::CheckOverlaps(const Path& path) const {
  const auto& segs = snapshot_.segments;
  std::vector<std::size_t> order(segs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::pair(segs[a].device, segs[a].address) < std::pair(segs[b].device, segs[b].address);
  });
  for (std::size_t k = 1; k < order.size(); ++k) {
    const Segment& prev = segs[order[k - 1]];
    const Segment& seg = segs[order[k]];
    const std::uint64_t gap =
        static_cast<std::uint64_t>(seg.address) - static_cast<std::uint64_t>(prev.address);
    if (prev.device != seg.device || prev.total_size_bytes <= 0 ||
        static_cast<std::uint64_t>(prev.total_size_bytes) <= gap) {
      continue;
    }
    const std::size_t first = std::min(order[k - 1], order[k]),
                      second = std::max(order[k - 1], order[k]);
    Path p(&path, second);
    const std::string what =
        prev.address == seg.address && prev.total_size_bytes == seg.total_size_bytes
            ? "lists the same segment as "
            : "overlaps ";
    char hex[32];
    std::snprintf(hex, sizeof(hex), "0x%" PRIx64, static_cast<std::uint64_t>(seg.address));
    return InvalidInput(p.str(), what + "segments[" + std::to_string(first) + "] (address " + hex +
                                     ", device " + std::to_string(seg.device) +
                                     "); a snapshot lists each device memory range once");
  }
  return OkStatus();
}

Status SnapshotParser::OneSegment(PickleValue dict, const Path& path) {
  if (dict.kind() != PickleKind::kDict) return WrongType(path, "dict", dict.kind());
  Segment seg;
  std::optional<PickleValue> blocks;
  bool has_address = false;
  for (std::size_t i = 0; i < dict.size(); ++i) {
    if (dict.key(i).kind() != PickleKind::kStr) continue;
    const std::string_view key = dict.key(i).AsStr();
    if (key == "blocks") {
      blocks = dict.value(i);
    } else {
      has_address |= key == "address";
      MEMTUNE_RETURN_IF_ERROR(SegmentField(seg, key, dict.value(i), path));
    }
  }
  if (!has_address) return InvalidInput(path.str(), "missing key 'address'");
  if (blocks) {
    Path p(&path, "blocks");
    MEMTUNE_RETURN_IF_ERROR(Blocks(seg, *blocks, p));
  }
  snapshot_.segments.push_back(std::move(seg));
  return OkStatus();
}

Status SnapshotParser::SegmentField(Segment& seg, std::string_view key, PickleValue v,
                                    const Path& path) {
  // Keys are matched by name; the Path needs a stable C string, hence the literals.
  if (key == "device") {
    Path p(&path, "device");
    MEMTUNE_TRY(std::int64_t d, ToInt(v, p, 0, kMaxDevice));
    seg.device = static_cast<int>(d);
  } else if (key == "address") {
    Path p(&path, "address");
    MEMTUNE_TRY(seg.address, ToInt(v, p, 0, kMaxAddress));
  } else if (key == "total_size") {
    Path p(&path, "total_size");
    MEMTUNE_TRY(seg.total_size_bytes, ToInt(v, p, 0, kMaxFieldBytes));
  } else if (key == "allocated_size") {
    Path p(&path, "allocated_size");
    MEMTUNE_TRY(seg.allocated_size_bytes, ToInt(v, p, 0, kMaxFieldBytes));
  } else if (key == "active_size") {
    Path p(&path, "active_size");
    MEMTUNE_TRY(seg.active_size_bytes, ToInt(v, p, 0, kMaxFieldBytes));
  } else if (key == "requested_size") {
    Path p(&path, "requested_size");
    MEMTUNE_TRY(seg.requested_size_bytes, ToInt(v, p, 0, kMaxFieldBytes));
  } else if (key == "stream") {
    Path p(&path, "stream");
    MEMTUNE_TRY(seg.stream, ToAnyInt(v, p));
  } else if (key == "segment_type") {
    Path p(&path, "segment_type");
    MEMTUNE_TRY(std::string_view t, ToStr(v, p));
    if (t != "large" && t != "small") {
      return InvalidInput(p.str(), std::string("'").append(SanitizeUtf8(t.substr(0, 40))) +
                                       "' is not a pool type; allowed: large, small");
    }
    seg.segment_type = t == "small" ? PoolType::kSmall : PoolType::kLarge;
  } else if (key == "segment_pool_id") {
    Path p(&path, "segment_pool_id");
    if ((v.kind() != PickleKind::kTuple && v.kind() != PickleKind::kList) || v.size() != 2) {
      return InvalidInput(p.str(), "expected a pair of ints");
    }
    MEMTUNE_TRY(seg.pool_id.first, ToAnyInt(v.at(0), p));
    MEMTUNE_TRY(seg.pool_id.second, ToAnyInt(v.at(1), p));
  } else if (key == "is_expandable") {
    Path p(&path, "is_expandable");
    MEMTUNE_TRY(seg.is_expandable, ToBool(v, p));
  } else if (key == "frames") {
    Path p(&path, "frames");
    MEMTUNE_TRY(seg.stack, Stack(v, p));
  }
  return OkStatus();
}

Status SnapshotParser::Blocks(Segment& seg, PickleValue list, const Path& path) {
  if (list.kind() != PickleKind::kList) return WrongType(path, "list", list.kind());
  MEMTUNE_RETURN_IF_ERROR(Spend(list.size(), path));
  seg.blocks.reserve(list.size());
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    Path p(&path, i);
    bool has_address = false;
    MEMTUNE_TRY(Block b, OneBlock(list.at(i), p, has_address));
    if (!has_address) {
      b.address = seg.address + offset;  // legacy blocks: contiguous from the segment start
      snapshot_.format = SnapshotFormat::kHistory;
    }
    offset += b.size_bytes;
    if (offset > seg.total_size_bytes) {
      return InvalidInput(p.str(), "blocks add up to more than the segment's total_size (" +
                                       std::to_string(seg.total_size_bytes) + ")");
    }
    seg.blocks.push_back(b);
  }
  return OkStatus();
}

Result<Block> SnapshotParser::OneBlock(PickleValue dict, const Path& path, bool& has_address) {
  if (dict.kind() != PickleKind::kDict) return WrongType(path, "dict", dict.kind());
  Block b;
  bool has_size = false, has_state = false, has_requested = false;
  for (std::size_t i = 0; i < dict.size(); ++i) {
    if (dict.key(i).kind() != PickleKind::kStr) continue;
    const std::string_view key = dict.key(i).AsStr();
    const PickleValue v = dict.value(i);
    if (key == "size") {
      Path p(&path, "size");
      MEMTUNE_TRY(b.size_bytes, ToInt(v, p, 0, kMaxFieldBytes));
      has_size = true;
    } else if (key == "requested_size") {
      Path p(&path, "requested_size");
      MEMTUNE_TRY(b.requested_bytes, ToInt(v, p, 0, kMaxFieldBytes));
      has_requested = true;
    } else if (key == "address") {
      Path p(&path, "address");
      MEMTUNE_TRY(b.address, ToInt(v, p, 0, kMaxAddress));
      has_address = true;
    } else if (key == "state") {
      Path p(&path, "state");
      MEMTUNE_TRY(std::string_view s, ToStr(v, p));
      MEMTUNE_TRY(b.state, ParseState(s, p));
      has_state = true;
    } else if (key == "frames") {
      Path p(&path, "frames");
      MEMTUNE_TRY(StackId stack, Stack(v, p));
      if (stack != kNoStack) b.stack = stack;
    } else if (key == "history" && b.stack == kNoStack) {
      // Legacy: the last history entry is the allocation that now lives in the block.
      Path p(&path, "history");
      if (v.kind() != PickleKind::kList) return WrongType(p, "list", v.kind());
      if (v.size() == 0) continue;
      const PickleValue last = v.at(v.size() - 1);
      Path q(&p, v.size() - 1);
      if (last.kind() != PickleKind::kDict) return WrongType(q, "dict", last.kind());
      if (const auto frames = last.Find("frames")) {
        Path r(&q, "frames");
        MEMTUNE_TRY(b.stack, Stack(*frames, r));
      }
    }
  }
  if (!has_size) return InvalidInput(path.str(), "missing key 'size'");
  if (!has_state) return InvalidInput(path.str(), "missing key 'state'");
  if (!has_requested && b.state != BlockState::kInactive) b.requested_bytes = b.size_bytes;
  return b;
}

}  // namespace memtune::snapshot
