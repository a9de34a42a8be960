// Per-job sizes the synthesizer replays (private). Every byte count comes from the tensor
// model the estimator also uses (memtune_tensors, src/tensors/): activations.h (saved
// tensors), layer_tensors.h (transients), model_state.h (parameters, gradients, optimizer
// state), job_facts.h (embedding, output and logits), layer_plan.h (what each layer keeps),
// layer_walk.h (the layer's forward and backward, tensor by tensor).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "memtune/estimate/schedule.h"
#include "memtune/model/job.h"
#include "tensors/activations.h"
#include "tensors/fsdp2_tensors.h"
#include "tensors/job_facts.h"
#include "tensors/layer_plan.h"
#include "tensors/layer_tensors.h"
#include "tensors/layer_walk.h"
#include "tensors/model_state.h"
#include "tensors/moe_sizes.h"
#include "tensors/workspaces.h"

namespace memtune::synth {

using tensors::LayerKeep;
using tensors::LayerPlan;
using tensors::LayerSizes;

// One model-state unit (a layer, the embedding, the output layer) of a chunk.
struct UnitState {
  int layer = -1;  // -1 for embedding/output
  const char* name = "";
  tensors::ModelStateBytes bytes;
};

struct ChunkPlan {
  std::vector<LayerPlan> layers;
  bool has_embedding = false, has_output = false;
  std::vector<UnitState> units;
};

struct RankPlan {
  std::vector<ChunkPlan> chunks;
  tensors::RankWorkspaces workspaces;  // library GEMM workspaces, allocated at start-up
  // The DDP buffers and DP rank 0's optimizer shards, parameter by parameter, when the job's
  // model state follows them (tensors/opt_layout.h UsesParamLayout); else the units' bytes.
  std::optional<tensors::OptLayout> opt_layout;
};

class Plan {
 public:
  int pp_size = 1, iterations = 2, group_size = 1;
  std::int64_t num_microbatches = 1;
  bool ep_overlap = false;
  bool sp = false;
  tensors::JobFacts facts;
  tensors::ModelStateRules state_rules;  // dtype bytes of the optimizer shards
  LayerSizes sizes[2][2];
  // MoE layers' sizes by expert rows (used when facts.moe_load is active), [fp8 layer].
  tensors::MoeLayerSizes moe_sizes[2];
  std::int64_t local_hidden = 0;  // act bytes of one micro-batch's hidden states (local tokens)
  std::vector<RankPlan> ranks;
  // framework fsdp2: one rank class per pipeline stage, its own generator
  std::vector<tensors::Fsdp2Facts> fsdp2;
};

}  // namespace memtune::synth
