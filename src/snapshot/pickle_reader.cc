// ReadPickle: the opcode loop. Operands are bounds-checked against the bytes left, every
// pop respects the current MARK, and nothing is ever imported or called.
// Opcode semantics: CPython Lib/pickle.py (_Unpickler.load_*), protocols 2-5 (PEP 307,
// PEP 3154, PEP 574).
#include <array>
#include <bit>
#include <cstring>
#include <optional>
#include <unordered_map>

#include "snapshot/id_array.h"
#include "snapshot/pickle_builder.h"
#include "snapshot/pickle_opcodes.h"

namespace memtune::snapshot {
namespace {

constexpr int kMinProtocol = 2;
constexpr int kMaxProtocol = 5;
constexpr int kMemoryCheckEvery = 4096;                 // opcodes between two memory-bound checks
constexpr std::size_t kInputBytesPerReservedMemo = 16;  // Python memoizes ~1 value per 10 B
constexpr std::size_t kMaxNameInError = 60;  // characters of an imported name quoted back

// The only imports REDUCE may call. OrderedDict: how Python pickles an OrderedDict.
// torch.jit._pickle: what the TorchScript pickler (torch/csrc/jit/serialization/pickler.cpp)
// writes for type-tagged dicts and specialised lists.
enum class AllowedGlobal : std::uint8_t {
  kNone,
  kOrderedDict,
  kRestoreTypeTag,
  kBuildList,
};

AllowedGlobal FindAllowedGlobal(std::string_view module, std::string_view name) {
  if (module == "collections" && name == "OrderedDict") return AllowedGlobal::kOrderedDict;
  if (module != "torch.jit._pickle") return AllowedGlobal::kNone;
  if (name == "restore_type_tag") return AllowedGlobal::kRestoreTypeTag;
  if (name == "build_intlist" || name == "build_doublelist" || name == "build_boollist") {
    return AllowedGlobal::kBuildList;
  }
  return AllowedGlobal::kNone;
}

// Quotes untrusted text back safely: printable ASCII only, bounded length.
std::string Printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, kMaxNameInError)) {
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (text.size() > kMaxNameInError) out += "...";
  return out;
}

class Reader {
 public:
  Reader(std::string bytes, const PickleLimits& limits)
      : builder_(std::move(bytes), limits.max_depth),
        data_(reinterpret_cast<const unsigned char*>(builder_.bytes().data())),
        size_(builder_.bytes().size()) {
    max_memory_ = limits.max_memory_bytes > 0
                      ? limits.max_memory_bytes
                      : PickleLimits::kAutoMemoryFactor * static_cast<std::int64_t>(size_) +
                            PickleLimits::kAutoMemorySlackBytes;
    small_ints_.fill(kNoId);
    memo_.reserve(size_ / kInputBytesPerReservedMemo);
  }

  Result<PickleDocument> Run();

 private:
  static constexpr std::uint32_t kNoId = 0xffffffffu;

  // --- errors ---
  // Steps return false and park the first error in error_: a Status per opcode (a variant
  // holding three strings, built and destroyed millions of times) cost ~10% of the parse.
  [[gnu::cold]] bool Park(Error error) {
    error_ = std::move(error);
    return false;
  }
  bool Park(Status status) { return status.has_value() || Park(status.error()); }
  [[gnu::cold]] bool Fail(const char* kind, const std::string& text) {
    return Park(InvalidInput("", std::string(kind) + ": " + OpcodeName(op_) + " at byte " +
                                     std::to_string(op_pos_) + " " + text));
  }
  [[gnu::cold]] bool Truncated(std::uint64_t need) {
    return Fail("truncated pickle", "needs " + std::to_string(need) + " bytes, " +
                                        std::to_string(size_ - pos_) + " left");
  }
  [[gnu::cold]] bool Malformed(const std::string& text) { return Fail("malformed pickle", text); }

  // --- operands ---
  bool Has(std::uint64_t n) const { return n <= size_ - pos_; }
  template <typename T>
  T ReadLE() {
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;  // little-endian host (x86-64, aarch64)
  }

  // --- stack ---
  std::size_t Base() const { return marks_.empty() ? 0 : marks_.back(); }
  bool Pop(std::uint32_t& id) {
    if (stack_.size() <= Base()) return false;
    id = stack_.back();
    stack_.pop_back();
    return true;
  }
  bool Top(std::uint32_t& id) const {
    if (stack_.size() <= Base()) return false;
    id = stack_.back();
    return true;
  }
  [[gnu::cold]] bool Underflow() { return Malformed("pops from an empty stack"); }

  // Inlined into Run's loop: a call per opcode (with this function's large frame) was a
  // tenth of the parse.
  [[gnu::always_inline]] inline bool Step(std::uint8_t op);
  bool Shared(std::uint32_t& cached, PickleKind kind, std::uint64_t payload);
  std::string_view StrOf(std::uint32_t id) const;
  bool GlobalOperands();
  [[gnu::always_inline]] inline bool Int(std::int64_t v);
  bool Long(std::uint64_t n);
  [[gnu::always_inline]] inline bool String(PickleKind kind, std::uint64_t length);
  bool BuildFromMark(PickleKind kind);
  bool TupleN(std::uint32_t n);
  bool AddToTop(PickleKind kind, std::span<const std::uint32_t> items, std::size_t below);
  // Memo opcodes run for about half of a snapshot's opcodes: the dense case is inline.
  [[gnu::always_inline]] bool MemoPut(std::uint64_t index) {
    if (index != memo_.size() || stack_.size() <= Base()) return MemoPutSlow(index);
    memo_.push_back(stack_.back());
    return true;
  }
  [[gnu::always_inline]] bool MemoGet(std::uint64_t index) {
    if (index >= memo_.size()) return MemoGetSparse(index);
    stack_.push_back(memo_[index]);
    return true;
  }
  bool MemoPutSlow(std::uint64_t index);
  bool MemoGetSparse(std::uint64_t index);
  bool Global(std::string_view module, std::string_view name);
  bool Reduce();
  bool CheckMemory();

  PickleBuilder builder_;
  const unsigned char* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
  std::size_t op_pos_ = 0;
  std::uint8_t op_ = 0;
  std::int64_t max_memory_;
  bool stopped_ = false;
  std::uint32_t root_ = 0;

  IdArray stack_;  // see id_array.h for why not std::vector
  std::vector<std::size_t> marks_;
  IdArray memo_;
  std::unordered_map<std::uint64_t, std::uint32_t> sparse_memo_;  // indices past memo_.size()
  std::array<std::uint32_t, 256> small_ints_;
  std::optional<Error> error_;  // set when a step returns false
  std::uint32_t none_ = kNoId, true_ = kNoId, false_ = kNoId;
};

Result<PickleDocument> Reader::Run() {
  op_ = size_ > 0 ? data_[0] : 0;
  if (size_ < 2 || data_[0] != kProto) {
    std::string first =
        size_ == 0 ? "the data is empty" : "it starts with byte " + HexByte(data_[0]);
    return InvalidInput("",
                        "not a pickle: " + first + "; a memory snapshot starts with PROTO (0x80)");
  }
  int ops = 0;
  while (!stopped_) {
    if (pos_ >= size_) {
      return InvalidInput("", "truncated pickle: the data ends at byte " + std::to_string(size_) +
                                  " before the STOP opcode");
    }
    op_pos_ = pos_;
    op_ = data_[pos_++];
    if (!Step(op_)) return std::move(*error_);
    if (++ops == kMemoryCheckEvery) {
      ops = 0;
      if (!CheckMemory()) return std::move(*error_);
    }
  }
  if (!CheckMemory()) return std::move(*error_);
  return builder_.Finish(root_);
}

bool Reader::CheckMemory() {
  const std::int64_t used =
      builder_.MemoryBytes() +
      static_cast<std::int64_t>((stack_.capacity() + memo_.capacity()) * sizeof(std::uint32_t) +
                                marks_.capacity() * sizeof(std::size_t) +
                                sparse_memo_.size() * 4 * sizeof(std::uint64_t));
  if (used <= max_memory_) return true;
  return Park(InvalidInput("", "pickle too large: reading it needs more than " +
                                   std::to_string(max_memory_) + " bytes of memory (at byte " +
                                   std::to_string(op_pos_) + ")"));
}

bool Reader::Int(std::int64_t v) {
  if (v >= 0 && v < 256) {
    std::uint32_t& cached = small_ints_[static_cast<std::size_t>(v)];
    if (cached == kNoId)
      cached = builder_.AddScalar(PickleKind::kInt, static_cast<std::uint64_t>(v));
    stack_.push_back(cached);
  } else {
    stack_.push_back(builder_.AddScalar(PickleKind::kInt, static_cast<std::uint64_t>(v)));
  }
  return true;
}

// LONG1/LONG4 operand: n bytes, little-endian two's complement. Values must fit in 64
// bits; [2^63, 2^64) (9 bytes ending in 0x00) is kept as its bit pattern, flagged unsigned.
bool Reader::Long(std::uint64_t n) {
  if (!Has(n)) return Truncated(n);
  const unsigned char* p = data_ + pos_;
  pos_ += n;
  if (n == 0) return Int(0);
  const bool negative = (p[n - 1] & 0x80) != 0;
  const unsigned char fill = negative ? 0xff : 0x00;
  for (std::uint64_t i = 8; i < n; ++i) {
    if (p[i] != fill) return Fail("not a memory snapshot", "holds an integer wider than 64 bits");
  }
  const std::uint64_t used = n < 8 ? n : 8;
  std::uint64_t bits = 0;
  std::memcpy(&bits, p, used);                            // little-endian host, as in ReadLE
  if (used < 8 && negative) bits |= ~0ULL << (8 * used);  // sign-extend
  const bool top = (bits >> 63) != 0;
  if (negative && !top) return Fail("not a memory snapshot", "holds an integer wider than 64 bits");
  if (negative || !top) return Int(static_cast<std::int64_t>(bits));
  stack_.push_back(builder_.AddScalar(PickleKind::kInt, bits, PickleNode::kFlagUnsigned));
  return true;
}

bool Reader::String(PickleKind kind, std::uint64_t length) {
  if (!Has(length)) return Truncated(length);
  if (length > 0xffffffffULL) return Fail("pickle too large", "holds a string of 4 GiB or more");
  stack_.push_back(builder_.AddString(kind, pos_, static_cast<std::uint32_t>(length)));
  pos_ += length;
  return true;
}

bool Reader::Step(std::uint8_t op) {
  std::uint32_t id = 0;
  switch (op) {
    case kProto: {
      if (!Has(1)) return Truncated(1);
      const int version = data_[pos_++];
      if (version < kMinProtocol || version > kMaxProtocol) {
        return Fail("not a memory snapshot",
                    "names protocol " + std::to_string(version) + "; memtune reads protocols 2-5");
      }
      return true;
    }
    case kFrame: {
      if (!Has(8)) return Truncated(8);
      const auto length = ReadLE<std::uint64_t>();
      if (!Has(length)) return Truncated(length);
      return true;
    }
    case kStop:
      if (!Pop(root_)) return Underflow();
      if (builder_.kind(root_) == PickleKind::kGlobal) {
        return Fail("not a memory snapshot", "returns an imported Python object");
      }
      stopped_ = true;
      return true;
    case kMark:
      marks_.push_back(stack_.size());
      return true;
    case kPop:
      if (Pop(id)) return true;
      if (marks_.empty()) return Underflow();
      marks_.pop_back();  // Python's POP on an empty stack drops the mark
      return true;
    case kPopMark:
      if (marks_.empty()) return Malformed("has no MARK to pop");
      stack_.Truncate(marks_.back());
      marks_.pop_back();
      return true;
    case kDup:
      if (!Top(id)) return Underflow();
      stack_.push_back(id);
      return true;
    case kNone:
      return Shared(none_, PickleKind::kNone, 0);
    case kNewTrue:
      return Shared(true_, PickleKind::kBool, 1);
    case kNewFalse:
      return Shared(false_, PickleKind::kBool, 0);
    case kBinInt:
      if (!Has(4)) return Truncated(4);
      return Int(ReadLE<std::int32_t>());
    case kBinInt1:
      if (!Has(1)) return Truncated(1);
      return Int(data_[pos_++]);
    case kBinInt2:
      if (!Has(2)) return Truncated(2);
      return Int(ReadLE<std::uint16_t>());
    case kLong1:
      if (!Has(1)) return Truncated(1);
      return Long(data_[pos_++]);
    case kLong4: {
      if (!Has(4)) return Truncated(4);
      const auto n = ReadLE<std::int32_t>();
      if (n < 0) return Malformed("has a negative length");
      return Long(static_cast<std::uint64_t>(n));
    }
    case kBinFloat: {
      if (!Has(8)) return Truncated(8);
      const std::uint64_t bits = __builtin_bswap64(ReadLE<std::uint64_t>());  // big-endian
      stack_.push_back(builder_.AddScalar(PickleKind::kFloat, bits));
      return true;
    }
    case kShortBinUnicode:
      if (!Has(1)) return Truncated(1);
      return String(PickleKind::kStr, data_[pos_++]);
    case kBinUnicode:
      if (!Has(4)) return Truncated(4);
      return String(PickleKind::kStr, ReadLE<std::uint32_t>());
    case kBinUnicode8:
      if (!Has(8)) return Truncated(8);
      return String(PickleKind::kStr, ReadLE<std::uint64_t>());
    case kShortBinBytes:
      if (!Has(1)) return Truncated(1);
      return String(PickleKind::kBytes, data_[pos_++]);
    case kBinBytes:
      if (!Has(4)) return Truncated(4);
      return String(PickleKind::kBytes, ReadLE<std::uint32_t>());
    case kBinBytes8:
      if (!Has(8)) return Truncated(8);
      return String(PickleKind::kBytes, ReadLE<std::uint64_t>());
    case kEmptyDict:
      stack_.push_back(builder_.AddContainer(PickleKind::kDict));
      return true;
    case kEmptyList:
      stack_.push_back(builder_.AddContainer(PickleKind::kList));
      return true;
    case kEmptyTuple:
      stack_.push_back(builder_.AddContainer(PickleKind::kTuple));
      return true;
    case kDict:
      return BuildFromMark(PickleKind::kDict);
    case kList:
      return BuildFromMark(PickleKind::kList);
    case kTuple:
      return BuildFromMark(PickleKind::kTuple);
    case kTuple1:
      return TupleN(1);
    case kTuple2:
      return TupleN(2);
    case kTuple3:
      return TupleN(3);
    case kSetItem:
    case kAppend: {
      const std::uint32_t n = op == kSetItem ? 2 : 1;
      if (stack_.size() < Base() + n) return Underflow();
      const std::size_t below = stack_.size() - n;
      const std::span<const std::uint32_t> items(stack_.data() + below, n);
      if (!AddToTop(op == kSetItem ? PickleKind::kDict : PickleKind::kList, items, below)) {
        return false;
      }
      stack_.Truncate(below);
      return true;
    }
    case kSetItems:
    case kAppends: {
      if (marks_.empty()) return Malformed("has no MARK");
      const std::size_t mark = marks_.back();
      marks_.pop_back();
      const std::span<const std::uint32_t> items(stack_.data() + mark, stack_.size() - mark);
      if (!AddToTop(op == kSetItems ? PickleKind::kDict : PickleKind::kList, items, mark)) {
        return false;
      }
      stack_.Truncate(mark);
      return true;
    }
    case kMemoize:
      return MemoPut(memo_.size());
    case kBinPut:
      if (!Has(1)) return Truncated(1);
      return MemoPut(data_[pos_++]);
    case kLongBinPut:
      if (!Has(4)) return Truncated(4);
      return MemoPut(ReadLE<std::uint32_t>());
    case kBinGet:
      if (!Has(1)) return Truncated(1);
      return MemoGet(data_[pos_++]);
    case kLongBinGet:
      if (!Has(4)) return Truncated(4);
      return MemoGet(ReadLE<std::uint32_t>());
    case kGlobal:
      return GlobalOperands();
    case kStackGlobal: {
      std::uint32_t module = 0, name = 0;
      if (!Pop(name) || !Pop(module)) return Underflow();
      if (builder_.kind(module) != PickleKind::kStr || builder_.kind(name) != PickleKind::kStr) {
        return Malformed("needs two str operands");
      }
      return Global(StrOf(module), StrOf(name));
    }
    case kReduce:
      return Reduce();
    default:
      break;
  }
  if (BuildsObjects(op)) {
    return Fail("not a memory snapshot",
                "would build a Python object; memtune reads only plain data (dict, list, "
                "tuple, str, bytes, int, float, bool, None)");
  }
  if (IsKnownOpcode(op)) {
    return Fail("not a memory snapshot", "is not used by PyTorch memory snapshots");
  }
  return Park(InvalidInput("", "not a pickle: byte " + HexByte(op) + " at byte " +
                                   std::to_string(op_pos_) + " is not a pickle opcode"));
}

bool Reader::Shared(std::uint32_t& cached, PickleKind kind, std::uint64_t payload) {
  if (cached == kNoId) cached = builder_.AddScalar(kind, payload);
  stack_.push_back(cached);
  return true;
}

std::string_view Reader::StrOf(std::uint32_t id) const {
  return std::string_view(builder_.bytes()).substr(builder_.payload(id), builder_.count(id));
}

bool Reader::BuildFromMark(PickleKind kind) {
  if (marks_.empty()) return Malformed("has no MARK");
  const std::size_t mark = marks_.back();
  marks_.pop_back();
  const std::span<const std::uint32_t> items(stack_.data() + mark, stack_.size() - mark);
  if (kind == PickleKind::kDict && items.size() % 2 != 0) {
    return Malformed("has a key without a value");
  }
  const std::uint32_t id = builder_.AddContainer(kind);
  if (!Park(builder_.AddItems(id, items, op_, op_pos_))) return false;
  stack_.Truncate(mark);
  stack_.push_back(id);
  return true;
}

bool Reader::TupleN(std::uint32_t n) {
  if (stack_.size() < Base() + n) return Underflow();
  const std::uint32_t id = builder_.AddContainer(PickleKind::kTuple);
  const std::span<const std::uint32_t> items(stack_.data() + stack_.size() - n, n);
  if (!Park(builder_.AddItems(id, items, op_, op_pos_))) return false;
  stack_.Truncate(stack_.size() - n);
  stack_.push_back(id);
  return true;
}

// SETITEM(S) into the dict / APPEND(S) onto the list at stack_[below - 1], the value just
// below the items (and below the MARK for the batch forms).
bool Reader::AddToTop(PickleKind kind, std::span<const std::uint32_t> items, std::size_t below) {
  if (below <= Base()) return Underflow();
  const std::uint32_t target = stack_[below - 1];
  if (builder_.kind(target) != kind) {
    return Malformed(std::string("needs a ") + PickleKindName(kind) + " below its items, not a " +
                     PickleKindName(builder_.kind(target)));
  }
  if (kind == PickleKind::kDict && items.size() % 2 != 0) {
    return Malformed("has a key without a value");
  }
  return Park(builder_.AddItems(target, items, op_, op_pos_));
}

bool Reader::MemoPutSlow(std::uint64_t index) {
  std::uint32_t id = 0;
  if (!Top(id)) return Underflow();
  if (index < memo_.size()) {
    memo_[index] = id;
  } else if (index == memo_.size()) {
    memo_.push_back(id);
  } else {
    sparse_memo_[index] = id;  // pickles written by hand may skip indices
  }
  return true;
}

bool Reader::MemoGetSparse(std::uint64_t index) {
  auto it = sparse_memo_.find(index);
  if (it == sparse_memo_.end()) {
    return Malformed("reads memo entry " + std::to_string(index) + ", which was never stored");
  }
  stack_.push_back(it->second);
  return true;
}

// GLOBAL's operands: "module\nname\n".
bool Reader::GlobalOperands() {
  const auto* begin = data_ + pos_;
  const auto* end = data_ + size_;
  const auto* nl1 = static_cast<const unsigned char*>(std::memchr(begin, '\n', end - begin));
  const auto* nl2 =
      nl1 == nullptr ? nullptr
                     : static_cast<const unsigned char*>(std::memchr(nl1 + 1, '\n', end - nl1 - 1));
  if (nl2 == nullptr) return Fail("truncated pickle", "has no \"module\\nname\\n\" operand");
  pos_ = static_cast<std::size_t>(nl2 + 1 - data_);
  return Global(std::string_view(reinterpret_cast<const char*>(begin), nl1 - begin),
                std::string_view(reinterpret_cast<const char*>(nl1 + 1), nl2 - nl1 - 1));
}

bool Reader::Global(std::string_view module, std::string_view name) {
  const AllowedGlobal which = FindAllowedGlobal(module, name);
  if (which == AllowedGlobal::kNone) {
    return Fail("not a memory snapshot",
                "imports '" + Printable(module) + "." + Printable(name) +
                    "'; memtune reads only plain data and imports nothing but " +
                    "collections.OrderedDict and torch.jit._pickle helpers");
  }
  stack_.push_back(builder_.AddScalar(PickleKind::kGlobal, static_cast<std::uint64_t>(which)));
  return true;
}

bool Reader::Reduce() {
  std::uint32_t args = 0, callable = 0;
  if (!Pop(args) || !Pop(callable)) return Underflow();
  if (builder_.kind(callable) != PickleKind::kGlobal) {
    return Fail("not a memory snapshot", "calls a " +
                                             std::string(PickleKindName(builder_.kind(callable))) +
                                             "; only the allowed imports may be called");
  }
  if (builder_.kind(args) != PickleKind::kTuple) return Malformed("needs an argument tuple");
  const auto which = static_cast<AllowedGlobal>(builder_.payload(callable));
  const std::uint32_t argc = builder_.count(args);
  if (which == AllowedGlobal::kOrderedDict) {
    if (argc != 0) return Malformed("calls collections.OrderedDict with arguments");
    stack_.push_back(builder_.AddContainer(PickleKind::kDict));
    return true;
  }
  // restore_type_tag(value, type_str) and build_*list(list) return their first argument.
  const bool ok = which == AllowedGlobal::kRestoreTypeTag ? argc == 2 : argc == 1;
  if (!ok) return Malformed("calls a torch.jit._pickle helper with the wrong arguments");
  const std::uint32_t value = builder_.ItemAt(args, 0);
  if (which != AllowedGlobal::kRestoreTypeTag && builder_.kind(value) != PickleKind::kList) {
    return Malformed("calls a torch.jit._pickle list builder without a list");
  }
  stack_.push_back(value);
  return true;
}

}  // namespace

Result<PickleDocument> ReadPickle(std::string bytes, const PickleLimits& limits) {
  Reader reader(std::move(bytes), limits);
  return reader.Run();
}

}  // namespace memtune::snapshot
