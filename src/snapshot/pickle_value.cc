// PickleValue accessors: read-only views into a finished PickleDocument.
#include <bit>

#include "memtune/core/check.h"
#include "memtune/snapshot/pickle.h"

namespace memtune::snapshot {

const char* PickleKindName(PickleKind kind) {
  switch (kind) {
    case PickleKind::kNone:
      return "None";
    case PickleKind::kBool:
      return "bool";
    case PickleKind::kInt:
      return "int";
    case PickleKind::kFloat:
      return "float";
    case PickleKind::kStr:
      return "str";
    case PickleKind::kBytes:
      return "bytes";
    case PickleKind::kList:
      return "list";
    case PickleKind::kTuple:
      return "tuple";
    case PickleKind::kDict:
      return "dict";
    case PickleKind::kGlobal:
      return "global";
  }
  return "?";
}

std::int64_t PickleDocument::memory_bytes() const {
  return static_cast<std::int64_t>(bytes_.size() + nodes_.capacity() * sizeof(PickleNode) +
                                   items_.capacity() * sizeof(std::uint32_t));
}

bool PickleValue::AsBool() const {
  MEMTUNE_CHECK(kind() == PickleKind::kBool, "AsBool on a non-bool");
  return node().payload != 0;
}

double PickleValue::AsFloat() const {
  MEMTUNE_CHECK(kind() == PickleKind::kFloat, "AsFloat on a non-float");
  return std::bit_cast<double>(node().payload);
}

std::optional<PickleValue> PickleValue::Find(std::string_view wanted) const {
  if (kind() != PickleKind::kDict) return std::nullopt;
  const PickleNode& n = node();
  if (n.count == 0) return std::nullopt;
  const std::uint32_t* items = doc_->items_.data() + n.payload;
  for (std::size_t i = n.count / 2; i-- > 0;) {  // last wins, as in Python
    const PickleNode& k = doc_->nodes_[items[2 * i]];
    if (k.kind != PickleKind::kStr || k.count != wanted.size()) continue;
    if (std::string_view(doc_->bytes_).substr(k.payload, k.count) == wanted) {
      return PickleValue(doc_, items[2 * i + 1]);
    }
  }
  return std::nullopt;
}

}  // namespace memtune::snapshot
