// What every pipeline rank of a Megatron job shares, computed once per job (memtune_tensors
// internal API): each layer kind's saved tensors and backward working set, and the
// embedding, output-layer and loss tensors of one micro-batch. The estimator multiplies
// them by held micro-batches (src/estimate/rank_components.cc); the trace generator
// allocates them one by one (src/synth/generator.cc).
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "memtune/model/job.h"
#include "tensors/activations.h"
#include "tensors/layer_plan.h"
#include "tensors/model_state.h"
#include "tensors/moe_load.h"
#include "tensors/workspaces.h"

namespace memtune::tensors {

// Tensor indices (ActTensor) in ascending order.
struct ActTensorList {
  std::array<std::int8_t, kNumActTensors> index{};
  int size = 0;
};

// What every rank shares, computed once per job (the hot path reuses it).
struct JobFacts {
  ActContext act;
  ParamCatalog params;
  ActBytes layer[2][2] = {};            // [moe][fp8 layer]
  std::int64_t layer_total[2][2] = {};  // SumBytes(layer[moe][fp8])
  ActTensorList layer_tensors[2][2];    // the tensors nonzero in layer[moe][fp8]
  int uniform_kind = -1;                // moe*2+fp8 when every layer is alike, else -1
  bool plain_layers = false;            // uniform_kind, no full recompute, no activation
                                        // offload: every layer's activations stored
  KeepRules keep;                       // full recompute / CPU offloading (layer_plan.h)
  model::OptimizerImpl optimizer_impl = model::OptimizerImpl::kFused;  // the step's temporaries
  std::int64_t workspace[2][2] = {};      // backward working set, [moe][fp8 layer]
  std::int64_t checkpoint_input = 0;      // full recompute: one unit's saved input
  std::int64_t embedding_per_mb = 0;      // token ids + embedding dropout mask
  std::int64_t local_hidden_per_mb = 0;   // one micro-batch's hidden states (local tokens)
  std::int64_t output_hidden_per_mb = 0;  // final-norm input + output-layer input
  std::int64_t logits_per_mb = 0;         // logits kept for the loss backward
  std::int64_t logits_transient = 0;      // bf16 logits / their gradient, one micro-batch
  // Without gradient_accumulation_fusion: the output layer's weight gradient (0 with it).
  std::int64_t output_wgrad = 0;
  // What the output layer's backward adds on top of the logits gradient, once this micro-
  // batch's kept logits are freed: its input gradient and output_wgrad (>= 0).
  std::int64_t output_backward_extra = 0;
  // defer_embedding_wgrad_compute: what one deferred micro-batch keeps until the flush (the
  // logits gradient and the output layer's input), and how many micro-batches defer.
  std::int64_t deferred_wgrad_per_mb = 0;
  std::int64_t deferred_microbatches = 0;
  std::int64_t num_microbatches = 1;
  int group_size = 1;         // microbatch_group_size_per_vp_stage
  WorkspaceRules workspaces;  // library GEMM workspaces (workspaces.h)
  // Routing imbalance (moe_load.h): when active, MoE layers' sizes vary by layer and
  // micro-batch.
  MoeLoadModel moe_load;
  // The estimator walks each rank's schedule (src/estimate/rank_walk.cc) instead of its
  // closed form: under routing imbalance, and when dense and MoE layers (or bf16 and fp8
  // ones) mix, where the largest working set need not meet the most activations held. Only
  // for layers that keep their saved tensors (no full recompute, no offloading).
  bool walk_schedule = false;
};

// Facts of `job` for every rank. `num_microbatches`: per iteration, when not the job's own
// (model::NumMicrobatches); at least 1 is used.
JobFacts MakeJobFacts(const model::Job& job, std::optional<std::int64_t> num_microbatches);

}  // namespace memtune::tensors
