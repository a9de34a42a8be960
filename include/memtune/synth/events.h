// The allocation events of a synthesized trace: what one pipeline rank's caching allocator
// sees, each labelled with where in the training step it happens (phase, iteration,
// model chunk, micro-batch, layer, tensor), so that a peak or an OOM can be explained.
#pragma once

#include <cstdint>
#include <string>

#include "memtune/alloc/simulator.h"

namespace memtune::synth {

enum class Phase : std::uint8_t {
  kStartup,    // model construction, DDP buffers, distributed-optimizer shards
  kForward,    // a forward pass (layers, embedding, output layer and loss)
  kBackward,   // a backward pass
  kRecompute,  // activation recompute re-creating what the forward dropped
  kOptimizer,  // the optimizer step (state created at the first step, fp32 grad copies)
  kZeroGrad,   // optimizer.zero_grad at the start of the next iteration
};

// "startup", "forward", "backward", "recompute", "optimizer", "zero_grad".
const char* PhaseName(Phase phase);

// Where an event happens. -1 = not applicable. `tensor` has static storage.
struct EventLabel {
  Phase phase = Phase::kStartup;
  int iteration = 0;    // 0-based training iteration
  int chunk = -1;       // model chunk (virtual stage) of the rank
  int microbatch = -1;
  int layer = -1;       // global transformer layer index
  const char* tensor = "";  // e.g. "act.mlp_fc1_out", "fwd.fc2_out", "grad_buffer"
};

// One-line text, e.g. "iter 1 backward chunk 4 mb 0 layer 79 bwd.fc1_dgrad".
std::string FormatLabel(const EventLabel& label);

enum class EventOp : std::uint8_t { kAlloc, kFree };

// One allocation or free. Handles are small dense ids, reused after their free.
struct SynthEvent {
  EventOp op = EventOp::kAlloc;
  alloc::HandleId handle = 0;
  std::int64_t bytes = 0;  // requested bytes (alloc); the allocation's bytes (free)
  EventLabel label;
  alloc::StreamId stream = 0;  // allocation stream (FSDP2's all-gather / reduce-scatter streams)
};

// Receives the events in order. Return false to stop the synthesis (e.g. after an OOM).
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual bool OnEvent(const SynthEvent& event) = 0;
};

}  // namespace memtune::synth
