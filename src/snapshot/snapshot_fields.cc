// Checked conversions of snapshot fields (see snapshot_fields.h).
#include "snapshot/snapshot_fields.h"

namespace memtune::snapshot {

std::string Path::str() const {
  std::string prefix = parent_ != nullptr ? parent_->str() : std::string();
  if (key_ == nullptr) return prefix + "[" + std::to_string(index_) + "]";
  return prefix.empty() ? std::string(key_) : prefix + "." + key_;
}

Error WrongType(const Path& path, const char* want, PickleKind got) {
  return InvalidInput(path.str(), std::string("expected ") + want + ", got " + PickleKindName(got));
}

Result<std::int64_t> ToInt(PickleValue v, const Path& path, std::int64_t lo, std::int64_t hi) {
  if (v.kind() != PickleKind::kInt) return WrongType(path, "int", v.kind());
  const std::int64_t x = v.AsInt();
  if (v.IsUnsignedInt() || x < lo || x > hi) {
    const std::string shown =
        v.IsUnsignedInt() ? std::to_string(static_cast<std::uint64_t>(x)) : std::to_string(x);
    return InvalidInput(path.str(), shown + " is out of range; allowed: " + std::to_string(lo) +
                                        " to " + std::to_string(hi));
  }
  return x;
}

Result<std::int64_t> ToAnyInt(PickleValue v, const Path& path) {
  if (v.kind() != PickleKind::kInt) return WrongType(path, "int", v.kind());
  return v.AsInt();
}

Result<bool> ToBool(PickleValue v, const Path& path) {
  if (v.kind() != PickleKind::kBool) return WrongType(path, "bool", v.kind());
  return v.AsBool();
}

Result<std::string_view> ToStr(PickleValue v, const Path& path) {
  if (v.kind() != PickleKind::kStr) return WrongType(path, "str", v.kind());
  return v.AsStr();
}

std::string SanitizeUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t len = c < 0x80           ? 1
                      : (c >> 5) == 0x6  ? 2
                      : (c >> 4) == 0xe  ? 3
                      : (c >> 3) == 0x1e ? 4
                                         : 0;
    bool ok = len > 0 && i + len <= text.size();
    for (std::size_t k = 1; ok && k < len; ++k) {
      ok = (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80;
    }
    if (ok) {
      out.append(text.substr(i, len));
      i += len;
    } else {
      out += '?';
      ++i;
    }
  }
  return out;
}

}  // namespace memtune::snapshot
