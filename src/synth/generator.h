// The event generator of one pipeline rank (private): walks start-up, the Megatron-Core
// schedule of every iteration and the optimizer step, emitting allocations and frees.
#pragma once

#include <array>
#include <vector>

#include "memtune/synth/synthesize.h"
#include "synth/emitter.h"
#include "synth/plan.h"

namespace memtune::synth {

class Generator {
 public:
  Generator(const Plan& plan, int pp_rank, EventSink& sink);
  TraceSummary Run();

 private:
  static constexpr alloc::HandleId kNone = Emitter::kNone;

  struct LayerRec {
    std::array<alloc::HandleId, tensors::kLayerSlots> saved;  // layer_walk.h slots
  };
  struct ChunkRec {
    std::vector<LayerRec> layers;
    alloc::HandleId tokens = kNone;
    tensors::OutputHeld<alloc::HandleId> output{kNone, kNone, kNone};  // the last stage's
  };

  alloc::HandleId Alloc(std::int64_t bytes, const char* tensor);
  void Free(alloc::HandleId handle);
  struct TensorExec;  // runs tensors/layer_walk.h's output-layer walk
  struct LayerExec;   // runs tensors/layer_walk.h's layer walk on one LayerRec
  void FreeSaved(LayerRec& rec, int slot);

  // Calls fn(chunk, unit) for every unit of every model chunk of the rank, in order, with
  // the label's chunk and layer set to the unit's.
  template <class Fn>
  void ForEachUnit(Fn fn) {
    for (std::size_t c = 0; c < rank_.chunks.size(); ++c) {
      label_.chunk = static_cast<int>(c);
      for (const UnitState& u : rank_.chunks[c].units) {
        label_.layer = u.layer;
        fn(c, u);
      }
    }
  }
  void Startup();
  void OptimizerStep();
  void ZeroGrad();
  void ForwardChunk(int chunk, int mb);
  void BackwardChunk(int chunk, int mb);
  // tensors::LayerForward / LayerBackward of `layer`, emitted.
  const tensors::LayerSizes& SizesOf(const LayerPlan& layer);
  alloc::HandleId ForwardLayer(LayerRec& rec, const LayerPlan& layer, alloc::HandleId input);
  alloc::HandleId BackwardLayer(LayerRec& rec, const LayerPlan& layer, alloc::HandleId grad_out);
  void ReplayGroup(ChunkRec& rec, const ChunkPlan& chunk, int top);

  const Plan& plan_;
  const RankPlan& rank_;
  int pp_rank_ = 0;
  Emitter emit_;
  EventLabel& label_;            // emit_'s label: where in the step the next event happens
  std::vector<ChunkRec> recs_;   // [chunk * m + mb]
  tensors::LayerSizes scratch_;  // SizesOf's MoE layer at its load
  std::vector<alloc::HandleId> step_grads_;
  std::vector<alloc::HandleId> deferred_;  // defer_embedding_wgrad_compute buffers
  bool dummy_wgrads_made_ = false;         // TE's weight-gradient placeholders allocated
  // Per chunk: the last micro-batch's received input and its retained gradient, kept from
  // the chunk's last backward to its next forward (RankEstimate::carried_bytes).
  std::vector<std::array<alloc::HandleId, 2>> carried_;
  alloc::HandleId retain_ = kNone;  // FreeSaved leaves this handle alive (carried)
};

}  // namespace memtune::synth
