// What each layer of a model chunk keeps from its forward to its backward (memtune_tensors
// internal API): the full-recompute and CPU-offloading policy of Megatron-LM d98e8a6
// megatron/core/transformer/transformer_block.py (_checkpointed_forward), recompute.py and
// cpu_offload.py, stated once. The estimator counts the kept layers and checkpoints of a
// chunk (src/estimate/rank_components.cc); the trace generator allocates, frees and replays
// them (src/synth/generator.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "memtune/estimate/schedule.h"
#include "memtune/model/job.h"
#include "tensors/model_state.h"

namespace memtune::tensors {

// What a layer keeps after its forward.
enum class LayerKeep : std::uint8_t {
  kAll,              // its saved tensors stay until its backward
  kCheckpointInput,  // full recompute: only its input (its unit's checkpoint) stays
  kNothing,          // full recompute inside a unit, or activations offloaded to the host
};

// One layer of a chunk, as its forward leaves it.
struct LayerPlan {
  int layer = 0;                   // global index (MTP layers follow the transformer layers)
  int kind_moe = 0, kind_fp8 = 0;  // its kind, the [moe][fp8] index of JobFacts' tables
  LayerKeep keep = LayerKeep::kAll;
  int group_first = 0;  // index in the chunk of its recompute unit's first layer
};

// The job's keep policy, read once from the model config.
struct KeepRules {
  bool full = false;     // recompute_granularity full
  bool uniform = false;  // recompute_method uniform (else block)
  int per_unit = 1;      // recompute_num_layers (at least 1)
  int offloaded = 0;     // cpu_offloading of activations: the first N layers of a chunk
};

inline KeepRules MakeKeepRules(const model::ModelConfig& m) {
  KeepRules r;
  r.full = m.recompute_granularity == model::RecomputeGranularity::kFull;
  r.uniform = m.recompute_method == model::RecomputeMethod::kUniform;
  r.per_unit = std::max(1, m.recompute_num_layers.value_or(1));
  if (m.cpu_offloading && m.cpu_offloading_activations)
    r.offloaded = std::max(0, m.cpu_offloading_num_layers);
  return r;
}

// Layer `i` (0-based; the chunk's MTP layers follow its transformer layers) of `chunk`:
// recompute.py uniform checkpoints groups of per_unit layers (only each group's input is
// kept); block checkpoints the first per_unit layers of the chunk one by one;
// cpu_offload.py moves the first `offloaded` layers' activations (of those not
// checkpointed) to the host. `moe_pattern`: ParamCatalog::moe_pattern (dense past its end).
// Example: uniform, per_unit 2, 5 layers -> CheckpointInput, Nothing, CheckpointInput,
// Nothing, CheckpointInput with group_first 0, 0, 2, 2, 4.
inline LayerPlan PlanLayer(const model::ModelConfig& m, const KeepRules& r,
                           const std::vector<bool>& moe_pattern, const estimate::ModelChunk& chunk,
                           int i) {
  LayerPlan lp;
  lp.layer = i < chunk.num_layers ? chunk.first_layer + i
                                  : static_cast<int>(m.num_layers) + i - chunk.num_layers;
  lp.kind_moe = lp.layer < static_cast<int>(moe_pattern.size()) && moe_pattern[lp.layer] ? 1 : 0;
  lp.kind_fp8 = IsBf16Layer(m, lp.layer) ? 0 : 1;
  lp.group_first = i;
  if (r.full && r.uniform) {
    lp.group_first = i - i % r.per_unit;
    lp.keep = i == lp.group_first ? LayerKeep::kCheckpointInput : LayerKeep::kNothing;
  } else if (r.full && i < r.per_unit) {
    lp.keep = LayerKeep::kCheckpointInput;
  } else if (i < r.offloaded) {
    lp.keep = LayerKeep::kNothing;
  }
  return lp;
}

// Layers a chunk of `n` layers re-runs at once in its backward: a uniform unit (per_unit,
// at most n) or one layer (block recompute, or an offloaded layer reloaded); 0 when it
// keeps every layer.
inline int ReplayedLayers(const KeepRules& r, int n) {
  if (r.full) return r.uniform ? std::min(r.per_unit, n) : 1;
  return r.offloaded > 0 ? 1 : 0;
}

// PlanLayer for every layer of `chunk`, in order.
std::vector<LayerPlan> PlanChunkLayers(const model::ModelConfig& m,
                                       const std::vector<bool>& moe_pattern,
                                       const estimate::ModelChunk& chunk);

}  // namespace memtune::tensors
