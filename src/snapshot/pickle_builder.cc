// PickleBuilder: value storage for the pickle reader (see pickle_builder.h).
#include "snapshot/pickle_builder.h"

#include <algorithm>
#include <limits>

#include "snapshot/pickle_opcodes.h"

namespace memtune::snapshot {
namespace {
constexpr std::size_t kInputBytesPerReservedNode = 8;  // typical snapshots: ~5 bytes per value
// Typical snapshots hold one container item per ~5 input bytes (a trace entry: 17 item ids
// in ~80 bytes); reserving less made items_ reallocate (a copy and fresh page faults).
constexpr std::size_t kInputBytesPerReservedItem = 4;
}  // namespace

PickleBuilder::PickleBuilder(std::string bytes, int max_depth) : max_depth_(max_depth) {
  doc_.bytes_ = std::move(bytes);
  doc_.nodes_.reserve(doc_.bytes_.size() / kInputBytesPerReservedNode);
  doc_.items_.reserve(doc_.bytes_.size() / kInputBytesPerReservedItem);
}

std::uint32_t PickleBuilder::ItemAt(std::uint32_t container, std::uint32_t i) const {
  const PickleNode& n = doc_.nodes_[container];
  if ((n.flags & PickleNode::kFlagChunked) == 0) return doc_.items_[n.payload + i];
  std::uint32_t c = Head(n);
  while (c != 0) {
    const Chunk& chunk = chunks_[c - 1];
    if (i < chunk.count) return doc_.items_[chunk.offset + i];
    i -= chunk.count;
    c = chunk.next;
  }
  return 0;  // unreachable for i < count(container)
}

namespace {
std::string What(std::uint8_t op, std::uint64_t at_byte) {
  return std::string(OpcodeName(op)) + " at byte " + std::to_string(at_byte);
}
}  // namespace

Status PickleBuilder::CheckChild(PickleNode& parent, std::uint32_t parent_id, std::uint32_t child,
                                 std::uint8_t op, std::uint64_t at_byte) {
  if (child == parent_id) {
    return InvalidInput(
        "", "malformed pickle: " + What(op, at_byte) + " stores a container into itself");
  }
  PickleNode& c = doc_.nodes_[child];
  if (c.kind < PickleKind::kList) return OkStatus();  // scalars: immutable, depth 0
  if (c.kind == PickleKind::kGlobal) {
    return InvalidInput("", "not a memory snapshot: " + What(op, at_byte) +
                                " stores an imported Python object into a container");
  }
  if (c.depth + 1 > max_depth_) {
    return InvalidInput("", "malformed pickle: " + What(op, at_byte) +
                                " nests containers deeper than " + std::to_string(max_depth_) +
                                " levels");
  }
  c.flags |= PickleNode::kFlagSealed;
  parent.depth = std::max<std::uint16_t>(parent.depth, static_cast<std::uint16_t>(c.depth + 1));
  return OkStatus();
}

Status PickleBuilder::AddItems(std::uint32_t container, std::span<const std::uint32_t> ids,
                               std::uint8_t op, std::uint64_t at_byte) {
  if (ids.empty()) return OkStatus();
  PickleNode& n = doc_.nodes_[container];
  if (n.flags & PickleNode::kFlagSealed) {
    // Python's pickler finishes a container before storing it; changing one afterwards is
    // the only way to build a cycle, so it is refused.
    return InvalidInput("", "malformed pickle: " + What(op, at_byte) +
                                " changes a container after it was stored in another one");
  }
  if (static_cast<std::uint64_t>(n.count) + ids.size() >
      std::numeric_limits<std::uint32_t>::max()) {
    return InvalidInput("", "pickle too large: " + What(op, at_byte) +
                                " makes a container of more than " + "2^32 items");
  }
  for (std::uint32_t id : ids) {
    // Most items are scalars other than the container itself: no Status needed for them.
    if (doc_.nodes_[id].kind < PickleKind::kList && id != container) continue;
    MEMTUNE_RETURN_IF_ERROR(CheckChild(n, container, id, op, at_byte));
  }
  const std::uint64_t offset = doc_.items_.size();
  doc_.items_.insert(doc_.items_.end(), ids.begin(), ids.end());
  Append(n, container, offset, static_cast<std::uint32_t>(ids.size()));
  return OkStatus();
}

// Records that `n` gained `count` items at items_[offset]. Items that continue the
// container's last run stay in place; otherwise the container switches to a chunk chain.
void PickleBuilder::Append(PickleNode& n, std::uint32_t container, std::uint64_t offset,
                           std::uint32_t count) {
  if ((n.flags & PickleNode::kFlagChunked) == 0) {
    if (n.count == 0) {
      n.payload = offset;  // first items: the final layout already
    } else if (n.payload + n.count != offset) {
      chunks_.push_back(Chunk{n.payload, n.count, 0});
      chunked_.push_back(container);
      n.flags |= PickleNode::kFlagChunked;
      const auto head = static_cast<std::uint32_t>(chunks_.size());
      n.payload = (static_cast<std::uint64_t>(head) << 32) | head;
      AppendChunk(n, offset, count);
    }
  } else {
    AppendChunk(n, offset, count);
  }
  n.count += count;
}

void PickleBuilder::AppendChunk(PickleNode& n, std::uint64_t offset, std::uint32_t count) {
  Chunk& tail = chunks_[Tail(n) - 1];
  if (tail.offset + tail.count == offset) {
    tail.count += count;  // contiguous: extend
    return;
  }
  chunks_.push_back(Chunk{offset, count, 0});
  const auto index = static_cast<std::uint32_t>(chunks_.size());
  chunks_[Tail(n) - 1].next = index;
  n.payload = (static_cast<std::uint64_t>(index) << 32) | Head(n);
}

std::int64_t PickleBuilder::MemoryBytes() const {
  return static_cast<std::int64_t>(
      doc_.nodes_.capacity() * sizeof(PickleNode) + doc_.items_.capacity() * sizeof(std::uint32_t) +
      chunks_.capacity() * sizeof(Chunk) + chunked_.capacity() * sizeof(std::uint32_t) +
      doc_.bytes_.size());
}

PickleDocument PickleBuilder::Finish(std::uint32_t root) {
  for (std::uint32_t id : chunked_) {  // only these are not contiguous yet
    PickleNode& n = doc_.nodes_[id];
    const std::uint64_t offset = doc_.items_.size();
    for (std::uint32_t c = Head(n); c != 0; c = chunks_[c - 1].next) {
      const Chunk chunk = chunks_[c - 1];
      for (std::uint32_t i = 0; i < chunk.count; ++i) {
        const std::uint32_t item = doc_.items_[chunk.offset + i];
        doc_.items_.push_back(item);
      }
    }
    n.payload = offset;
    n.flags &= static_cast<std::uint8_t>(~PickleNode::kFlagChunked);
  }
  chunks_.clear();
  chunks_.shrink_to_fit();
  chunked_.clear();
  chunked_.shrink_to_fit();
  doc_.root_ = root;
  return std::move(doc_);
}

}  // namespace memtune::snapshot
