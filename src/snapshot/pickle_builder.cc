// PickleBuilder: value storage for the pickle reader (see pickle_builder.h).
#include "snapshot/pickle_builder.h"

#include "snapshot/pickle_opcodes.h"

#include <algorithm>
#include <limits>

namespace memtune::snapshot {
namespace {
constexpr std::size_t kInputBytesPerReservedNode = 8;  // typical snapshots: ~5 bytes per value
}  // namespace

PickleBuilder::PickleBuilder(std::string bytes, int max_depth) : max_depth_(max_depth) {
  doc_.bytes_ = std::move(bytes);
  doc_.nodes_.reserve(doc_.bytes_.size() / kInputBytesPerReservedNode);
  doc_.items_.reserve(doc_.bytes_.size() / kInputBytesPerReservedNode);
}

std::uint32_t PickleBuilder::AddScalar(PickleKind kind, std::uint64_t payload,
                                       std::uint8_t flags) {
  PickleNode n;
  n.kind = kind;
  n.flags = flags;
  n.payload = payload;
  doc_.nodes_.push_back(n);
  return static_cast<std::uint32_t>(doc_.nodes_.size() - 1);
}

std::uint32_t PickleBuilder::AddString(PickleKind kind, std::uint64_t offset,
                                       std::uint32_t length) {
  PickleNode n;
  n.kind = kind;
  n.count = length;
  n.payload = offset;
  doc_.nodes_.push_back(n);
  return static_cast<std::uint32_t>(doc_.nodes_.size() - 1);
}

std::uint32_t PickleBuilder::AddContainer(PickleKind kind) {
  PickleNode n;
  n.kind = kind;
  n.depth = 1;
  doc_.nodes_.push_back(n);
  return static_cast<std::uint32_t>(doc_.nodes_.size() - 1);
}

std::uint32_t PickleBuilder::ItemAt(std::uint32_t container, std::uint32_t i) const {
  const PickleNode& n = doc_.nodes_[container];
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

Status PickleBuilder::CheckChild(PickleNode& parent, std::uint32_t parent_id,
                                 std::uint32_t child, std::uint8_t op, std::uint64_t at_byte) {
  if (child == parent_id) {
    return InvalidInput("", "malformed pickle: " + What(op, at_byte) + " stores a container into itself");
  }
  PickleNode& c = doc_.nodes_[child];
  if (c.kind < PickleKind::kList) return OkStatus();  // scalars: immutable, depth 0
  if (c.kind == PickleKind::kGlobal) {
    return InvalidInput("", "not a memory snapshot: " + What(op, at_byte) +
                                " stores an imported Python object into a container");
  }
  if (c.depth + 1 > max_depth_) {
    return InvalidInput("", "malformed pickle: " + What(op, at_byte) + " nests containers deeper than " +
                                std::to_string(max_depth_) + " levels");
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
  if (static_cast<std::uint64_t>(n.count) + ids.size() > std::numeric_limits<std::uint32_t>::max()) {
    return InvalidInput("", "pickle too large: " + What(op, at_byte) + " makes a container of more than " +
                                "2^32 items");
  }
  for (std::uint32_t id : ids) MEMTUNE_RETURN_IF_ERROR(CheckChild(n, container, id, op, at_byte));
  const std::uint64_t offset = doc_.items_.size();
  doc_.items_.insert(doc_.items_.end(), ids.begin(), ids.end());
  const std::uint32_t tail = Tail(n);
  if (tail != 0 && chunks_[tail - 1].offset + chunks_[tail - 1].count == offset) {
    chunks_[tail - 1].count += static_cast<std::uint32_t>(ids.size());  // contiguous: extend
  } else {
    chunks_.push_back(Chunk{offset, static_cast<std::uint32_t>(ids.size()), 0});
    const auto index = static_cast<std::uint32_t>(chunks_.size());
    if (tail != 0) chunks_[tail - 1].next = index;
    const std::uint32_t head = Head(n) != 0 ? Head(n) : index;
    n.payload = (static_cast<std::uint64_t>(index) << 32) | head;
  }
  n.count += static_cast<std::uint32_t>(ids.size());
  return OkStatus();
}

std::int64_t PickleBuilder::MemoryBytes() const {
  return static_cast<std::int64_t>(doc_.nodes_.capacity() * sizeof(PickleNode) +
                                   doc_.items_.capacity() * sizeof(std::uint32_t) +
                                   chunks_.capacity() * sizeof(Chunk) + doc_.bytes_.size());
}

PickleDocument PickleBuilder::Finish(std::uint32_t root) {
  for (PickleNode& n : doc_.nodes_) {
    const bool container = n.kind == PickleKind::kList || n.kind == PickleKind::kTuple ||
                           n.kind == PickleKind::kDict;
    if (!container) continue;
    const std::uint32_t head = Head(n);
    if (head == 0) {
      n.payload = 0;
    } else if (chunks_[head - 1].next == 0) {
      n.payload = chunks_[head - 1].offset;  // one chunk: already contiguous
    } else {
      const std::uint64_t offset = doc_.items_.size();
      for (std::uint32_t c = head; c != 0; c = chunks_[c - 1].next) {
        const Chunk chunk = chunks_[c - 1];
        for (std::uint32_t i = 0; i < chunk.count; ++i) {
          const std::uint32_t id = doc_.items_[chunk.offset + i];
          doc_.items_.push_back(id);
        }
      }
      n.payload = offset;
    }
  }
  chunks_.clear();
  chunks_.shrink_to_fit();
  doc_.root_ = root;
  return std::move(doc_);
}

}  // namespace memtune::snapshot
