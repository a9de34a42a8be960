// A safe reader for the Python pickles PyTorch writes for memory snapshots.
//
// Reads protocols 2-5 (Python's pickle.dump and the TorchScript pickler) into a small,
// immutable value model: None, bool, int, float, str, bytes, list, tuple, dict. It never
// runs or imports anything: opcodes that build arbitrary Python objects are refused with
// "not a memory snapshot", except the few that name a plain container (see ReadPickle).
// See docs/snapshot.md and docs/allocator.md section 8.7 for the opcode set.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/core/check.h"
#include "memtune/core/result.h"

namespace memtune::snapshot {

// Bounds that keep a hostile or broken file from exhausting memory or the stack.
struct PickleLimits {
  // Deepest container nesting accepted (a snapshot needs 6: root, device_traces, trace,
  // entry, frames, frame).
  int max_depth = 64;
  // Upper bound on the memory the parsed document may use, in bytes; 0 = automatic
  // (kAutoMemoryFactor x input size + kAutoMemorySlackBytes). The document's real footprint
  // is at most about 20 bytes per input byte, so the automatic bound never rejects a
  // well-formed pickle; it exists as a hard guarantee.
  std::int64_t max_memory_bytes = 0;

  static constexpr std::int64_t kAutoMemoryFactor = 48;                       // x input
  static constexpr std::int64_t kAutoMemorySlackBytes = 64LL * 1024 * 1024;  // bytes
};

// What a PickleValue holds. kGlobal is a reference to an allowed callable (see ReadPickle);
// it only exists as an argument to REDUCE and never appears in a result of ReadPickle.
enum class PickleKind : std::uint8_t {
  kNone,
  kBool,
  kInt,
  kFloat,
  kStr,
  kBytes,
  kList,
  kTuple,
  kDict,
  kGlobal,
};

// "None", "bool", "int", ..., for error messages.
const char* PickleKindName(PickleKind kind);

// One stored value (internal representation; 16 bytes). Containers point into the
// document's item array; strings point into the document's bytes.
struct PickleNode {
  PickleKind kind = PickleKind::kNone;
  std::uint8_t flags = 0;       // kFlag* below
  std::uint16_t depth = 0;      // 0 for scalars, 1 + deepest child for containers
  std::uint32_t count = 0;      // str/bytes: length; containers: item ids (dict: 2 per pair)
  std::uint64_t payload = 0;    // int/float bits, bool, str offset, container item offset

  static constexpr std::uint8_t kFlagSealed = 1;    // stored in a container: immutable
  static constexpr std::uint8_t kFlagUnsigned = 2;  // int in [2^63, 2^64), payload is the bits
  static constexpr std::uint8_t kFlagChunked = 4;   // reader only: items not yet contiguous
};

class PickleDocument;

// A cheap view of one value inside a PickleDocument; valid while the document lives.
// Accessors have preconditions on kind() (checked with MEMTUNE_CHECK); callers test the
// kind first, so malformed input never reaches a failed check.
class PickleValue {
 public:
  PickleValue(const PickleDocument* doc, std::uint32_t id) : doc_(doc), id_(id) {}

  PickleKind kind() const;
  std::uint32_t id() const { return id_; }  // stable identity: shared (memoized) values agree

  bool AsBool() const;              // kBool
  std::int64_t AsInt() const;       // kInt (an unsigned >= 2^63 comes back as its bit pattern)
  bool IsUnsignedInt() const;       // kInt stored from a value >= 2^63
  double AsFloat() const;           // kFloat
  std::string_view AsStr() const;   // kStr (UTF-8 as written, not validated) or kBytes

  // Number of items of a list or tuple, or of key/value pairs of a dict.
  std::size_t size() const;
  // Item i of a list or tuple (i < size()).
  PickleValue at(std::size_t i) const;
  // Key and value of pair i of a dict (i < size()), in insertion order.
  PickleValue key(std::size_t i) const;
  PickleValue value(std::size_t i) const;
  // The value stored under a str key of a dict; when a key repeats, the last one wins (as
  // in Python). std::nullopt when absent or when the dict has no such str key.
  std::optional<PickleValue> Find(std::string_view key) const;

 private:
  const PickleNode& node() const;
  std::uint32_t item(std::size_t i) const;

  const PickleDocument* doc_;
  std::uint32_t id_;
};

// A parsed pickle: owns the input bytes (strings are views into them), the values and the
// container items. Movable, not copyable; PickleValues refer into it.
class PickleDocument {
 public:
  PickleDocument() = default;
  PickleDocument(PickleDocument&&) = default;
  PickleDocument& operator=(PickleDocument&&) = default;
  PickleDocument(const PickleDocument&) = delete;
  PickleDocument& operator=(const PickleDocument&) = delete;

  PickleValue root() const { return PickleValue(this, root_); }
  std::size_t node_count() const { return nodes_.size(); }
  // Bytes held by the document (input + values + items), for the memory bound.
  std::int64_t memory_bytes() const;

 private:
  friend class PickleValue;
  friend class PickleBuilder;  // src/snapshot/pickle_builder.h

  std::string bytes_;
  std::vector<PickleNode> nodes_;
  std::vector<std::uint32_t> items_;
  std::uint32_t root_ = 0;
};

// Parses `bytes` (the whole file, already decompressed) as a pickle.
//
// Accepted opcodes: PROTO (2-5), FRAME, STOP, MARK, POP, POP_MARK, DUP, NONE, NEWTRUE,
// NEWFALSE, BININT, BININT1, BININT2, LONG1, LONG4 (up to 64-bit values), BINFLOAT,
// SHORT_BINUNICODE, BINUNICODE, BINUNICODE8, SHORT_BINBYTES, BINBYTES, BINBYTES8,
// EMPTY_DICT/LIST/TUPLE, DICT, LIST, TUPLE, TUPLE1-3, SETITEM(S), APPEND(S), MEMOIZE,
// BINPUT, LONG_BINPUT, BINGET, LONG_BINGET; GLOBAL/STACK_GLOBAL + REDUCE only for
// collections.OrderedDict() (an empty dict) and the TorchScript helpers
// torch.jit._pickle.restore_type_tag(x, type) and build_{int,double,bool}list(list),
// which return their first argument.
// Errors (kInvalidInput; the message names the opcode and the byte offset):
//   "not a pickle: ..."             the data does not start with PROTO 2-5
//   "not a memory snapshot: ..."    an opcode or import that would build a Python object
//   "truncated pickle: ..."         an operand or the STOP opcode lies past the end
//   "malformed pickle: ..."         stack/mark underflow, bad memo index, wrong container,
//                                   a container changed after being stored (cycles), depth
//   "pickle too large: ..."         the memory bound of `limits` would be exceeded
// Never crashes, hangs or recurses on any input; time is linear in the input size.
// Example: auto doc = ReadPickle(std::move(file_bytes)); if (doc) Use(doc->root());
Result<PickleDocument> ReadPickle(std::string bytes, const PickleLimits& limits = {});

// ---- inline accessors (hot in snapshot conversion) ----

inline const PickleNode& PickleValue::node() const { return doc_->nodes_[id_]; }
inline PickleKind PickleValue::kind() const { return node().kind; }

inline std::int64_t PickleValue::AsInt() const {
  MEMTUNE_CHECK(kind() == PickleKind::kInt, "AsInt on a non-int");
  return static_cast<std::int64_t>(node().payload);
}

inline bool PickleValue::IsUnsignedInt() const {
  return kind() == PickleKind::kInt && (node().flags & PickleNode::kFlagUnsigned) != 0;
}

inline std::string_view PickleValue::AsStr() const {
  const PickleNode& n = node();
  MEMTUNE_CHECK(n.kind == PickleKind::kStr || n.kind == PickleKind::kBytes, "AsStr on a non-string");
  return std::string_view(doc_->bytes_).substr(n.payload, n.count);
}

inline std::uint32_t PickleValue::item(std::size_t i) const {
  const PickleNode& n = node();
  MEMTUNE_CHECK(i < n.count, "container index out of range");
  return doc_->items_[n.payload + i];
}

inline std::size_t PickleValue::size() const {
  const PickleNode& n = node();
  MEMTUNE_CHECK(n.kind == PickleKind::kList || n.kind == PickleKind::kTuple || n.kind == PickleKind::kDict,
                "size() on a non-container");
  return n.kind == PickleKind::kDict ? n.count / 2 : n.count;
}

inline PickleValue PickleValue::at(std::size_t i) const {
  MEMTUNE_CHECK(kind() == PickleKind::kList || kind() == PickleKind::kTuple, "at() on a non-sequence");
  return PickleValue(doc_, item(i));
}

inline PickleValue PickleValue::key(std::size_t i) const {
  MEMTUNE_CHECK(kind() == PickleKind::kDict, "key() on a non-dict");
  return PickleValue(doc_, item(2 * i));
}

inline PickleValue PickleValue::value(std::size_t i) const {
  MEMTUNE_CHECK(kind() == PickleKind::kDict, "value() on a non-dict");
  return PickleValue(doc_, item(2 * i + 1));
}

}  // namespace memtune::snapshot
