// Streaming reader of the memtune allocation trace format (docs/trace-format.md).
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "memtune/alloc/constants.h"
#include "memtune/alloc/trace.h"
#include "memtune/core/suggest.h"
#include "memtune/core/units.h"

namespace memtune::alloc {
namespace {

constexpr std::size_t kRecentNames = 65536;  // released names remembered for diagnostics
constexpr std::int64_t kMaxTraceBytes = std::int64_t{1} << 62;  // bytes; above is "absurd"
constexpr std::int64_t kMaxLineChars = 1 << 20;  // characters; a longer line is not a trace

struct OpSpec {
  std::string_view name;
  TraceOp op;
  int min_args, max_args;
};

constexpr OpSpec kOps[] = {
    {"alloc", TraceOp::kAlloc, 2, 3},
    {"free", TraceOp::kFree, 1, 1},
    {"free_completed", TraceOp::kFreeCompleted, 1, 1},
    {"record_stream", TraceOp::kRecordStream, 2, 2},
    {"empty_cache", TraceOp::kEmptyCache, 0, 0},
    {"set_capacity", TraceOp::kSetCapacity, 1, 1},
    {"set_non_pytorch", TraceOp::kSetNonPytorch, 1, 1},
    {"set_memory_fraction", TraceOp::kSetMemoryFraction, 1, 1},
    {"reset_peak_stats", TraceOp::kResetPeakStats, 0, 0},
};

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

// Splits at whitespace; at most 5 tokens are kept (more is an error for every op).
int Split(std::string_view s, std::string_view* out, int max) {
  int n = 0;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && IsSpace(s[i])) ++i;
    if (i >= s.size()) break;
    std::size_t j = i;
    while (j < s.size() && !IsSpace(s[j])) ++j;
    if (n == max) return max + 1;
    out[n++] = s.substr(i, j - i);
    i = j;
  }
  return n;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string_view TraceOpName(TraceOp op) {
  for (const OpSpec& spec : kOps) {
    if (spec.op == op) return spec.name;
  }
  return "?";
}

TraceReader::TraceReader(std::istream& in, std::string source_name)
    : in_(in), source_(std::move(source_name)) {}

Error TraceReader::Fail(const std::string& message, const std::string& hint) const {
  return InvalidInput(source_ + ":" + std::to_string(line_number_), message, hint);
}

Result<bool> TraceReader::Next(TraceEvent& event) {
  // A bounded getline: a binary or endless input (/dev/zero) must not grow one line
  // without limit. line_ is the buffer; the line is its first characters (gcount).
  if (line_.size() != kMaxLineChars + 1) line_.assign(kMaxLineChars + 1, '\0');
  for (;;) {
    in_.getline(line_.data(), static_cast<std::streamsize>(line_.size()));
    const std::streamsize got = in_.gcount();
    if (got == 0 && in_.fail()) return false;  // end of input
    ++line_number_;
    if (in_.fail() && !in_.eof()) {
      return Fail("the line is longer than " + FormatWithCommas(kMaxLineChars) + " characters",
                  "allowed: one event per line (docs/trace-format.md); is this a trace file?");
    }
    const bool delimited = !in_.eof();
    std::string_view text(line_.data(), static_cast<std::size_t>(got) - (delimited ? 1 : 0));
    // A '#' at the start of a token starts a comment; on an event line it is the label.
    std::size_t hash = std::string_view::npos;
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '#' && (i == 0 || IsSpace(text[i - 1]))) {
        hash = i;
        break;
      }
    }
    std::string_view label;
    if (hash != std::string_view::npos) {
      label = Trim(text.substr(hash + 1));
      text = text.substr(0, hash);
    }
    if (Trim(text).empty()) continue;
    event = TraceEvent{};
    event.line = line_number_;
    event.label = label;
    MEMTUNE_TRY(bool ok, ParseLine(text, event));
    return ok;
  }
}

Result<bool> TraceReader::ParseLine(std::string_view text, TraceEvent& event) {
  constexpr int kMaxTokens = 5;
  std::string_view tok[kMaxTokens];
  const int n = Split(text, tok, kMaxTokens);
  const OpSpec* spec = nullptr;
  for (const OpSpec& s : kOps) {
    if (s.name == tok[0]) spec = &s;
  }
  if (spec == nullptr) {
    std::vector<std::string> names;
    for (const OpSpec& s : kOps) names.emplace_back(s.name);
    return Fail(
        "unknown trace operation '" + std::string(tok[0]) + "'; allowed: " + JoinNames(names),
        DidYouMean(tok[0], names));
  }
  const int args = n - 1;
  if (args < spec->min_args || args > spec->max_args) {
    return Fail(
        std::string("'").append(spec->name) + "' takes " +
        (spec->min_args == spec->max_args
             ? std::to_string(spec->min_args)
             : std::to_string(spec->min_args) + " or " + std::to_string(spec->max_args)) +
        " field(s), got " +
        (n > kMaxTokens ? "more than " + std::to_string(kMaxTokens - 1) : std::to_string(args)));
  }
  event.op = spec->op;
  auto parse_bytes = [&](std::string_view t) -> Result<std::int64_t> {
    std::int64_t v = 0;
    bool digits = !t.empty() && t.size() <= 19;
    for (char c : t) digits = digits && std::isdigit(static_cast<unsigned char>(c));
    if (digits) {
      // At most 19 digits: below 10^19 < 2^64, so the unsigned sum cannot wrap.
      std::uint64_t u = 0;
      for (char c : t) u = u * 10 + static_cast<std::uint64_t>(c - '0');
      v = u > static_cast<std::uint64_t>(kMaxTraceBytes) ? kMaxTraceBytes + 1
                                                         : static_cast<std::int64_t>(u);
    } else {
      auto parsed = ParseBytes(t, "size");
      if (!parsed) return Fail("bad size '" + std::string(t) + "': " + parsed.error().message);
      v = *parsed;
    }
    if (v > kMaxTraceBytes)
      return Fail("size '" + std::string(t) + "' is absurd (over 2^62 bytes)");
    return v;
  };
  auto parse_stream = [&](std::string_view t) -> Result<StreamId> {
    const std::string s(t);
    char* end = nullptr;
    const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    errno = 0;
    const unsigned long long v = std::strtoull(s.c_str() + (hex ? 2 : 0), &end, hex ? 16 : 10);
    if (s.empty() || s[0] == '-' || s[0] == '+' || end != s.c_str() + s.size() ||
        end == s.c_str() + (hex ? 2 : 0) || errno == ERANGE) {
      return Fail("bad stream '" + s + "'; expected a non-negative integer (decimal or 0x hex)");
    }
    return static_cast<StreamId>(v);
  };
  switch (spec->op) {
    case TraceOp::kAlloc: {
      event.handle_name = tok[1];
      MEMTUNE_TRY(event.bytes, parse_bytes(tok[2]));
      if (args == 3) {
        MEMTUNE_TRY(event.stream, parse_stream(tok[3]));
      }
      break;
    }
    case TraceOp::kRecordStream: {
      event.handle_name = tok[1];
      MEMTUNE_TRY(event.stream, parse_stream(tok[2]));
      break;
    }
    case TraceOp::kFree:
    case TraceOp::kFreeCompleted:
      event.handle_name = tok[1];
      break;
    case TraceOp::kSetCapacity:
    case TraceOp::kSetNonPytorch: {
      MEMTUNE_TRY(event.bytes, parse_bytes(tok[1]));
      // The simulator's address model is sized for kMaxDeviceBytes (core/units.h): a larger
      // device made expandable segments run out of addresses and report false OOMs.
      if (spec->op == TraceOp::kSetCapacity && event.bytes > kMaxDeviceBytes) {
        return Fail("capacity '" + std::string(tok[1]) +
                    "' is above 1024 TiB, the largest device memory memtune simulates");
      }
      break;
    }
    case TraceOp::kSetMemoryFraction: {
      const std::string s(tok[1]);
      char* end = nullptr;
      event.fraction = std::strtod(s.c_str(), &end);
      if (end != s.c_str() + s.size() || !(event.fraction >= 0.0 && event.fraction <= 1.0)) {
        return Fail("bad memory fraction '" + s + "'; expected a number in [0, 1]");
      }
      break;
    }
    case TraceOp::kEmptyCache:
    case TraceOp::kResetPeakStats:
      break;
  }
  if (!event.handle_name.empty()) event.handle = Intern(event.handle_name);
  return true;
}

HandleId TraceReader::Intern(std::string_view name) {
  auto it = ids_.find(std::string(name));
  if (it != ids_.end()) return it->second;
  HandleId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<HandleId>(names_.size());
    names_.emplace_back();
  }
  names_[id] = std::string(name);
  ids_.emplace(names_[id], id);
  return id;
}

void TraceReader::Release(HandleId id) {
  if (id >= names_.size() || names_[id].empty()) return;
  ids_.erase(names_[id]);
  recent_.push_back(names_[id]);
  recent_set_.insert(names_[id]);
  if (recent_.size() > kRecentNames) {
    recent_set_.erase(recent_set_.find(recent_.front()));
    recent_.pop_front();
  }
  names_[id].clear();
  free_ids_.push_back(id);
}

bool TraceReader::RecentlyReleased(std::string_view name) const {
  return recent_set_.count(std::string(name)) > 0;
}

}  // namespace memtune::alloc
