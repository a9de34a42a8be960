// Typed field access for ParseSnapshot: field paths for error messages and checked
// conversions of PickleValues to ints, strings and bools.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "memtune/core/result.h"
#include "memtune/snapshot/pickle.h"

namespace memtune::snapshot {

// Largest byte quantity accepted in a snapshot field (1 PiB). Keeps all sums of sizes far
// from int64 overflow without limiting any real GPU.
inline constexpr std::int64_t kMaxFieldBytes = std::int64_t{1} << 50;
// Largest address accepted (addresses + sizes stay below 2^63).
inline constexpr std::int64_t kMaxAddress = std::int64_t{1} << 62;

// A field path built on the stack, rendered only when an error is reported:
// Path root("segments"); Path seg(&root, 3); Path size(&seg, "size") -> "segments[3].size".
class Path {
 public:
  explicit Path(const char* key) : parent_(nullptr), key_(key) {}
  Path(const Path* parent, const char* key) : parent_(parent), key_(key) {}
  Path(const Path* parent, std::size_t index) : parent_(parent), index_(index) {}
  std::string str() const;

 private:
  const Path* parent_;
  const char* key_ = nullptr;
  std::size_t index_ = 0;
};

// "<path>: expected <want>, got <kind>".
Error WrongType(const Path& path, const char* want, PickleKind got);

// The int at `path`, within [lo, hi]. Errors name the path, the value and the range.
Result<std::int64_t> ToInt(PickleValue v, const Path& path, std::int64_t lo, std::int64_t hi);
// An int of any 64-bit value (stream handles, time stamps); unsigned >= 2^63 wraps.
Result<std::int64_t> ToAnyInt(PickleValue v, const Path& path);
Result<bool> ToBool(PickleValue v, const Path& path);
Result<std::string_view> ToStr(PickleValue v, const Path& path);

// Copies text, replacing bytes that are not valid UTF-8 with '?'.
std::string SanitizeUtf8(std::string_view text);

}  // namespace memtune::snapshot
