// Builds a PickleDocument while the opcode loop runs: values, container items appended in
// batches (chunks), sealing of stored containers (no cycles) and the depth bound.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "memtune/core/result.h"
#include "memtune/snapshot/pickle.h"

namespace memtune::snapshot {

class PickleBuilder {
 public:
  // Reserves room proportional to the input size (never to a length the input claims).
  PickleBuilder(std::string bytes, int max_depth);

  const std::string& bytes() const { return doc_.bytes_; }

  // New values; return their ids. Always inlined: one of them runs for most opcodes.
  [[gnu::always_inline]] std::uint32_t AddScalar(PickleKind kind, std::uint64_t payload,
                                                 std::uint8_t flags = 0) {
    return Add(PickleNode{kind, flags, 0, 0, payload});
  }
  [[gnu::always_inline]] std::uint32_t AddString(PickleKind kind, std::uint64_t offset,
                                                 std::uint32_t length) {
    return Add(PickleNode{kind, 0, 0, length, offset});
  }
  [[gnu::always_inline]] std::uint32_t AddContainer(PickleKind kind) {
    return Add(PickleNode{kind, 0, 1, 0, 0});
  }

  PickleKind kind(std::uint32_t id) const { return doc_.nodes_[id].kind; }
  std::uint64_t payload(std::uint32_t id) const { return doc_.nodes_[id].payload; }
  std::uint32_t count(std::uint32_t id) const { return doc_.nodes_[id].count; }
  // Item i of a container still under construction (walks its chunks).
  std::uint32_t ItemAt(std::uint32_t container, std::uint32_t i) const;

  // Appends `ids` to the list, tuple or dict `container` (dict: key, value, key, value...),
  // sealing each child. `op` and `at_byte` name the opcode for error messages. Errors:
  // "malformed pickle: <op> at byte <n> ..." for a sealed container, a container stored
  // into itself, or a nesting depth above the bound; "not a memory snapshot: ..." for an
  // imported callable stored as data.
  Status AddItems(std::uint32_t container, std::span<const std::uint32_t> ids, std::uint8_t op,
                  std::uint64_t at_byte);

  // Bytes used so far (values, items, chunks), for the memory bound.
  std::int64_t MemoryBytes() const;

  // Gives the finished document with `root` as its root; containers made of several
  // chunks are made contiguous (only those: the others are in their final form already).
  PickleDocument Finish(std::uint32_t root);

 private:
  // A container whose items are one run of items_ holds (offset, count) as in a finished
  // document. Once a later batch lands elsewhere (another container was filled in
  // between), it gets kFlagChunked and payload = (tail chunk index + 1) << 32 | (head + 1).
  struct Chunk {
    std::uint64_t offset;  // into doc_.items_
    std::uint32_t count;   // item ids
    std::uint32_t next;    // index + 1 of the next chunk, 0 = last
  };
  [[gnu::always_inline]] std::uint32_t Add(const PickleNode& n) {
    doc_.nodes_.push_back(n);
    return static_cast<std::uint32_t>(doc_.nodes_.size() - 1);
  }
  static std::uint32_t Head(const PickleNode& n) { return static_cast<std::uint32_t>(n.payload); }
  static std::uint32_t Tail(const PickleNode& n) {
    return static_cast<std::uint32_t>(n.payload >> 32);
  }
  void Append(PickleNode& n, std::uint32_t container, std::uint64_t offset, std::uint32_t count);
  void AppendChunk(PickleNode& n, std::uint64_t offset, std::uint32_t count);
  Status CheckChild(PickleNode& parent, std::uint32_t parent_id, std::uint32_t child,
                    std::uint8_t op, std::uint64_t at_byte);

  PickleDocument doc_;
  std::vector<Chunk> chunks_;
  std::vector<std::uint32_t> chunked_;  // ids of containers with kFlagChunked
  int max_depth_;
};

}  // namespace memtune::snapshot
