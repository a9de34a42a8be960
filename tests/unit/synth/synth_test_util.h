// A sink that checks and records a synthesized trace (tests only).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "memtune/synth/synthesize.h"

namespace memtune::synth::testing {

struct Recorder : EventSink {
  std::unordered_map<alloc::HandleId, std::int64_t> live;
  std::int64_t live_bytes = 0, peak_bytes = 0;
  EventLabel peak_label;
  std::vector<std::string> errors;        // double alloc / free of a dead handle
  std::vector<SynthEvent> events;         // when `keep_events`
  std::vector<std::int64_t> live_before_iteration;  // live bytes at each iteration's first forward
  bool keep_events = false;
  int last_iteration_seen = -1;

  bool OnEvent(const SynthEvent& e) override {
    if (keep_events) events.push_back(e);
    if (e.label.phase == Phase::kForward && e.label.iteration > last_iteration_seen) {
      last_iteration_seen = e.label.iteration;
      live_before_iteration.push_back(live_bytes);
    }
    if (e.op == EventOp::kAlloc) {
      if (!live.emplace(e.handle, e.bytes).second) errors.push_back("double alloc " + FormatLabel(e.label));
      live_bytes += e.bytes;
      if (live_bytes > peak_bytes) { peak_bytes = live_bytes; peak_label = e.label; }
    } else {
      auto it = live.find(e.handle);
      if (it == live.end()) { errors.push_back("free of a dead handle " + FormatLabel(e.label)); return true; }
      live_bytes -= it->second;
      live.erase(it);
    }
    return true;
  }
};

}  // namespace memtune::synth::testing
