// Handle bookkeeping shared by the trace generators (private): dense handle ids reused after
// their free, the label of the current position in the step, the sink, and early stop.
#pragma once

#include <cstdint>
#include <vector>

#include "memtune/synth/events.h"

namespace memtune::synth {

class Emitter {
 public:
  static constexpr alloc::HandleId kNone = 0xFFFFFFFFu;

  explicit Emitter(EventSink& sink) : sink_(sink) {}

  // Emits an allocation labelled `tensor` (static storage) at the current label; kNone for
  // zero bytes or after the sink stopped the synthesis.
  alloc::HandleId Alloc(std::int64_t bytes, const char* tensor, alloc::StreamId stream = 0);
  // Emits the free of a live handle (labelled with its tensor); kNone and stops are no-ops.
  void Free(alloc::HandleId handle);

  EventLabel& label() { return label_; }
  bool stopped() const { return stopped_; }
  std::int64_t events() const { return events_; }
  // Bytes of the handles still live (the persistent state at the end of a trace).
  std::int64_t LiveBytes() const;
  // Bytes of a live handle (0 for kNone or after a stop).
  std::int64_t Bytes(alloc::HandleId handle) const {
    return handle < handle_bytes_.size() ? handle_bytes_[handle] : 0;
  }

 private:
  EventSink& sink_;
  EventLabel label_;
  bool stopped_ = false;
  std::int64_t events_ = 0;
  std::vector<std::int64_t> handle_bytes_;
  std::vector<const char*> handle_names_;
  std::vector<alloc::HandleId> free_handles_;
};

}  // namespace memtune::synth
