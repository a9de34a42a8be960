// The memtune allocation trace: a line-based text format (docs/trace-format.md) read as a
// stream, one event at a time. Memory grows with the number of live handles, not with the
// length of the trace.
//
// Example:
//   alloc act0 20MiB        # layer 0 activation
//   alloc grad 4096 7
//   free act0
//   empty_cache
#pragma once

#include <cstdint>
#include <deque>
#include <istream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "memtune/alloc/simulator.h"
#include "memtune/core/result.h"

namespace memtune::alloc {

enum class TraceOp : std::uint8_t {
  kAlloc,              // alloc <handle> <bytes> [stream]
  kFree,               // free <handle>
  kFreeCompleted,      // free_completed <handle>: a record_stream-deferred free completes
  kRecordStream,       // record_stream <handle> <stream>
  kEmptyCache,         // empty_cache
  kSetCapacity,        // set_capacity <bytes>
  kSetNonPytorch,      // set_non_pytorch <bytes>
  kSetMemoryFraction,  // set_memory_fraction <fraction in [0, 1]>
  kResetPeakStats,     // reset_peak_stats
};

// The op's keyword as written in traces ("alloc", "free", ...).
std::string_view TraceOpName(TraceOp op);

// One parsed line. String views point into the reader's line buffer and stay valid until the
// next call to TraceReader::Next.
struct TraceEvent {
  TraceOp op = TraceOp::kAlloc;
  std::int64_t line = 0;  // 1-based line number in the source
  HandleId handle = 0;    // interned id of the handle name (ops with a handle)
  std::string_view handle_name;
  std::int64_t bytes = 0;  // alloc size, set_capacity, set_non_pytorch
  StreamId stream = 0;     // alloc (default 0), record_stream
  double fraction = 0.0;   // set_memory_fraction
  std::string_view label;  // text after a trailing "# ", or empty
};

// Reads events from a stream. Handle names are interned to dense ids; the consumer calls
// Release(id) once a handle is dead so ids (and memory) are reused.
// Not thread-safe. The istream must outlive the reader.
class TraceReader {
 public:
  // `source_name` names the input in errors ("train.trace" -> "train.trace:17").
  TraceReader(std::istream& in, std::string source_name);

  // Reads the next event into `event`. Returns false at the end of input.
  // Errors: kInvalidInput with field "<source>:<line>" for an unknown op (with a
  // suggestion), a missing or extra field, a bad number, a negative or absurd size (over
  // 2^62 bytes), or a fraction outside [0, 1].
  Result<bool> Next(TraceEvent& event);

  // The handle `id` is dead; its name may be interned again with a new id.
  void Release(HandleId id);
  // True when `name` was released recently (the last 65,536 releases): a second free of it
  // is a double free rather than an unknown handle.
  bool RecentlyReleased(std::string_view name) const;
  const std::string& source_name() const { return source_; }
  // Number of interned (not yet released) handles.
  std::size_t live_handles() const { return ids_.size(); }

 private:
  Result<bool> ParseLine(std::string_view text, TraceEvent& event);
  HandleId Intern(std::string_view name);
  Error Fail(const std::string& message, const std::string& hint = {}) const;

  std::istream& in_;
  std::string source_;
  std::string line_;
  std::int64_t line_number_ = 0;
  std::unordered_map<std::string, HandleId> ids_;
  std::vector<std::string> names_;  // id -> name (empty when free)
  std::vector<HandleId> free_ids_;
  std::deque<std::string> recent_;
  std::unordered_multiset<std::string> recent_set_;
};

}  // namespace memtune::alloc
