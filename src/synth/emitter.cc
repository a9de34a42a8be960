// Emitter: dense handle ids and the event stream of one synthesized trace.
#include "synth/emitter.h"

namespace memtune::synth {

alloc::HandleId Emitter::Alloc(std::int64_t bytes, const char* tensor, alloc::StreamId stream) {
  if (bytes <= 0 || stopped_) return kNone;
  alloc::HandleId h;
  if (!free_handles_.empty()) {
    h = free_handles_.back();
    free_handles_.pop_back();
  } else {
    h = static_cast<alloc::HandleId>(handle_bytes_.size());
    handle_bytes_.push_back(0);
    handle_names_.push_back("");
  }
  handle_bytes_[h] = bytes;
  handle_names_[h] = tensor;
  label_.tensor = tensor;
  ++events_;
  SynthEvent event{EventOp::kAlloc, h, bytes, label_};
  event.stream = stream;
  if (!sink_.OnEvent(event)) stopped_ = true;
  return h;
}

void Emitter::Free(alloc::HandleId h) {
  if (h == kNone || stopped_) return;
  ++events_;
  EventLabel label = label_;
  label.tensor = handle_names_[h];
  if (!sink_.OnEvent(SynthEvent{EventOp::kFree, h, handle_bytes_[h], label})) stopped_ = true;
  handle_bytes_[h] = 0;
  free_handles_.push_back(h);
}

std::int64_t Emitter::LiveBytes() const {
  std::int64_t total = 0;
  for (std::int64_t b : handle_bytes_) total += b;
  return total;
}

}  // namespace memtune::synth
