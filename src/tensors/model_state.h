// Model state of one pipeline rank: parameters, gradient buffers and optimizer state,
// dtype by dtype (memtune_tensors internal API, used by the estimator and the trace
// synthesizer; docs/estimator.md "Model state").
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "memtune/estimate/schedule.h"
#include "memtune/model/job.h"
#include "memtune/model/parameters.h"
#include "tensors/opt_layout.h"
#include "tensors/wgrad_shapes.h"

namespace memtune::tensors {

// Element counts of one rank, by family. "hp" = stored in params_dtype; "fp8" = TE linear
// weights stored as fp8 (fp8_param_gather); "frozen" = requires_grad false (PEFT base).
struct RankParams {
  std::int64_t dense_hp = 0, dense_fp8 = 0, dense_frozen_hp = 0, dense_frozen_fp8 = 0;
  std::int64_t expert_hp = 0, expert_fp8 = 0, expert_frozen_hp = 0, expert_frozen_fp8 = 0;
  std::int64_t buffers_fp32 = 0;    // persistent fp32 buffers (router expert_bias)
  std::int64_t te_linear = 0;       // TE linear weight elements (fp8 caches / transposes)
  std::int64_t largest_layer = 0;   // elements of the largest layer (FSDP all-gather)
  std::int64_t largest_tensor = 0;  // elements of the largest trainable tensor
  std::int64_t DenseTrainable() const { return dense_hp + dense_fp8; }
  std::int64_t ExpertTrainable() const { return expert_hp + expert_fp8; }
};

// Element sums of one tensor list on one rank (TP / EP sharding applied).
struct ListSums {
  std::int64_t dense_hp = 0, dense_fp8 = 0, expert_hp = 0, expert_fp8 = 0, buffers = 0;
  std::int64_t largest = 0;  // elements of the largest trainable tensor (not summed)
  std::int64_t Total() const { return dense_hp + dense_fp8 + expert_hp + expert_fp8 + buffers; }
};

// The job's parameter tensors (model/parameters.h), enumerated and summed per layer kind
// once per job, so that each rank only multiplies by its layer counts.
struct ParamCatalog {
  ListSums layer[2][2];              // [moe][stored fp8] per transformer layer
  std::int64_t te_linear[2] = {};    // TE linear-weight elements per layer, [moe]
  std::int64_t lora[2] = {};         // LoRA adapter elements per layer, [moe]: dense params
  std::int64_t lora_expert[2] = {};  // the expert linears' adapters (expert params), [moe]
  ListSums embedding, output, word_embedding, mtp_extra;
  // The placeholder shapes of one layer's linears, [moe], and of an MTP block's extra
  // linears, in params_dtype (wgrad_shapes.h; whether the job keeps placeholders is the
  // workspace rules' call).
  WgradShapes wgrad_layer[2], wgrad_mtp;
  // model::MoeLayerPattern, per global layer (MTP layers appended); empty when the model
  // has no experts (every layer dense): read it as dense past its end.
  std::vector<bool> moe_pattern;
  // UsesParamLayout(job): model state follows the DDP buffers and optimizer shards of
  // opt_layout.h, from these lists.
  bool param_layout = false;
  LayoutLists layout;
};

ParamCatalog MakeParamCatalog(const model::Job& job);

// Transformer Engine linear weights: the only tensors TE stores in fp8 with fp8 params
// (MCore fp8_utils / TE module weights; embeddings, norms, router and output layer stay
// in params_dtype).
bool IsTeLinearWeight(const model::ParamTensor& tensor);

// Whether global layer `layer` runs in bf16 in an fp8 job (first_last_layers_bf16 with
// num_layers_at_start/end_in_bf16; MCore fp8_utils.is_first_last_bf16_layer).
bool IsBf16Layer(const model::ModelConfig& model, int layer);

// Elements on the rank of `stage` (TP/EP sharding applied), including LoRA adapters.
RankParams CountRankParams(const model::Job& job, const ParamCatalog& catalog,
                           const estimate::StageLayout& stage, int pp_size);
// The same for a rank given by its chunks (schedule_internal.h PipelineChunks::Stage).
RankParams CountRankParams(const model::Job& job, const ParamCatalog& catalog,
                           std::span<const estimate::ModelChunk> chunks, int pp_size);

// Bytes of each model-state family of one rank, and the optimizer-step transient.
struct ModelStateBytes {
  std::int64_t params_hp = 0;             // params_dtype parameters (+ frozen)
  std::int64_t params_fp8 = 0;            // fp8 parameter data (uint8 buffers)
  std::int64_t fp8_transpose = 0;         // fp8 column-wise copies (Hopper) or cached fp8 weights
  std::int64_t buffers = 0;               // persistent non-trainable buffers
  std::int64_t attn_score_buffer = 0;     // MCore local attention's global scores buffer
  std::int64_t output_gather_buffer = 0;  // the output layer's SP gather in that buffer (beyond it)
  std::int64_t te_workspace = 0;          // Transformer Engine GEMM workspaces (workspaces.h)
  std::int64_t torch_workspace = 0;       // PyTorch cuBLAS workspaces (workspaces.h)
  std::int64_t dummy_wgrad = 0;           // TE's cached weight-gradient placeholders (workspaces.h)
  std::int64_t grads = 0;                 // DDP gradient buffers (requires_grad only)
  std::int64_t main_params = 0;           // fp32 master copies (GPU share)
  std::int64_t exp_avg = 0;               // Adam first moment (GPU share)
  std::int64_t exp_avg_sq = 0;            // Adam second moment (GPU share)
  std::int64_t expert = 0;                // the part of all the above that is routed experts
  std::int64_t step_transient = 0;        // optimizer step: fp32 copies of bf16 grad shards
  // Optimizer step temporaries of PyTorch's AdamW (memtune.optimizer_implementation):
  // foreach, the sqrt of every exp_avg_sq at once; for_loop, three of the largest one.
  std::int64_t step_workspace = 0;
  std::int64_t fp8_cast_copy = 0;  // optimizer step, after Adam: params_dtype copies of the
                                   // fp8 params' main shards (TE quantize_master_weights)
  std::int64_t fsdp_gather = 0;    // Megatron-FSDP: unsharded layer params during compute
  std::int64_t Total() const {
    return params_hp + params_fp8 + fp8_transpose + buffers + attn_score_buffer +
           output_gather_buffer + te_workspace + torch_workspace + dummy_wgrad + grads +
           main_params + exp_avg + exp_avg_sq;
  }
};

// Applies dtypes, gradient-buffer rules, distributed-optimizer / FSDP sharding and
// optimizer CPU offload. `fp8_needs_transpose`: the GPU cannot run non-TN fp8 GEMMs
// (pre-Blackwell), so TE keeps a transposed copy of each fp8 weight.
ModelStateBytes ComputeModelState(const model::Job& job, const RankParams& params,
                                  bool fp8_needs_transpose);

// What ComputeModelState reads from the job (dtypes, shard sizes, optimizer), resolved once
// per job; every rank then only applies it to its element counts.
struct ModelStateRules {
  std::int64_t dense_shard = 1, expert_shard = 1;  // distributed-optimizer shard sizes
  bool shard_grads = false, shard_params = false;  // Megatron-FSDP sharding strategy
  bool fsdp = false;                               // ddp.use_megatron_fsdp
  int pbytes = 2, gbytes = 2;                      // parameter and grad-buffer dtype bytes
  bool fp8 = false, fp8_params = false, fp8_needs_transpose = true;
  bool aware = false;              // precision-aware optimizer
  bool fp8_cast_copies = false;    // the step re-quantizes fp8 params through params_dtype copies
  int master = 4, m1 = 4, m2 = 4;  // optimizer state bytes per element
  double on_gpu = 1.0;             // share of optimizer state on the GPU
  bool adam = true;                // optimizer.optimizer == adam (else SGD: no moments)
  model::OptimizerImpl impl = model::OptimizerImpl::kFused;
  bool dist_opt = false;  // optimizer.use_distributed_optimizer (padded DDP buffers)
};
ModelStateRules MakeModelStateRules(const model::Job& job, bool fp8_needs_transpose);
// ComputeModelState(job, params, fp8_needs_transpose) with the job's rules resolved.
ModelStateBytes ComputeModelState(const ModelStateRules& rules, const RankParams& params);
// The same with the rank's buffers and optimizer shards taken from `layout` (opt_layout.h,
// when the catalog's param_layout holds): padded DDP buffers, DP rank 0's shards.
ModelStateBytes ComputeModelState(const ModelStateRules& rules, const RankParams& params,
                                  const OptLayout& layout);

}  // namespace memtune::tensors
