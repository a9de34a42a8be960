// Per-job sizes the synthesizer replays (private). Every byte count comes from the accurate
// estimator's model: activations.h (saved tensors), layer_tensors.h (transients),
// model_state.h (parameters, gradients, optimizer state), rank_components.h (embedding,
// output and logits).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "estimate/activations.h"
#include "estimate/fsdp2_tensors.h"
#include "estimate/layer_tensors.h"
#include "estimate/model_state.h"
#include "estimate/rank_components.h"
#include "estimate/workspaces.h"
#include "memtune/estimate/schedule.h"
#include "memtune/model/job.h"

namespace memtune::synth {

namespace est = memtune::estimate::internal;

// The tensors of one layer kind ([moe][fp8]).
struct LayerSizes {
  est::ActBytes kept{};      // saved for backward (recompute applied)
  est::ActBytes dropped{};   // created in forward, dropped by selective recompute
  est::FwdBytes fwd{};
  est::BwdBytes bwd{};
  est::AttnBwdBytes attn_bwd{};
  est::ActBytes offloaded{};  // fine-grained offloading: held on the host between passes
  std::int64_t q_bytes = 0, k_bytes = 0;  // the q and k parts of act.attn_qkv (0: one piece)
};

// What a layer keeps after its forward.
enum class LayerKeep : std::uint8_t {
  kAll,              // saved tensors stay until its backward
  kCheckpointInput,  // full recompute: only its input (the unit's checkpoint) stays
  kNothing,          // full recompute inside a unit, or activations offloaded to the host
};

struct LayerPlan {
  int layer = 0;  // global index (MTP layers follow the transformer layers)
  int kind_moe = 0, kind_fp8 = 0;
  LayerKeep keep = LayerKeep::kAll;
  int group_first = 0;  // index in the chunk of its recompute unit's first layer
};

// One model-state unit (a layer, the embedding, the output layer) of a chunk.
struct UnitState {
  int layer = -1;  // -1 for embedding/output
  const char* name = "";
  est::ModelStateBytes bytes;
};

struct ChunkPlan {
  std::vector<LayerPlan> layers;
  bool has_embedding = false, has_output = false;
  std::vector<UnitState> units;
};

struct RankPlan {
  std::vector<ChunkPlan> chunks;
  est::RankWorkspaces workspaces;  // library GEMM workspaces, allocated at start-up
};

class Plan {
 public:
  int pp_size = 1, iterations = 2, group_size = 1;
  std::int64_t num_microbatches = 1;
  bool ep_overlap = false;
  bool sp = false;
  est::JobFacts facts;
  LayerSizes sizes[2][2];
  std::int64_t local_hidden = 0;   // act bytes of one micro-batch's hidden states (local tokens)
  std::vector<RankPlan> ranks;
  std::optional<est::Fsdp2Facts> fsdp2;  // framework fsdp2: one rank class, its own generator
};

}  // namespace memtune::synth
