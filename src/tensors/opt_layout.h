// Megatron-Core's DDP buffers and optimizer shards of one rank, parameter by parameter
// (memtune_tensors internal API, used by the estimator and the trace synthesizer;
// docs/estimator.md "Model state", docs/synth.md "Optimizer state").
//
// Sources (Megatron-LM d98e8a64): distributed/distributed_data_parallel.py (bucket_size
// max(40M, 1M x DP*CP) with overlap_grad_reduce, else one bucket; one bucket on pipeline
// ranks > 0, on virtual chunks > 0 and with overlap_param_gather_with_optimizer_step:
// training.py), distributed/param_and_grad_buffer.py (one buffer per parameter dtype and
// expert-parallel flag, requires_grad parameters in named_parameters order),
// optimizer/distrib_optimizer.py _compute_per_buffer_param_layout (parameters walked in
// reverse, each start aligned to 64 elements, a bucket closed once it holds bucket_size
// elements and padded to lcm(DP, 128); a shared_embedding parameter gets its own bucket),
// _build_model_gbuf_range (DP rank r owns the r-th 1/DP of each bucket),
// _build_optimizer_group_ranges (group, then model chunk, buffer, bucket, parameter),
// _build_model_and_main_param_groups (`shard.clone().float()` per parameter),
// _copy_model_grads_to_main_grads (`shard_main_param.grad = shard_grad.float()` per
// parameter); optimizer/__init__.py _get_param_groups (the weight-decay group, then the
// no-decay group of biases and 1-D parameters; dense and expert parameters in separate
// optimizers, dense first); TE d0067d0d optimizers/fused_adam.py (exp_avg then exp_avg_sq
// per parameter, created at the first step). Without the distributed optimizer each
// parameter is one whole shard and the buffers are not padded.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "memtune/estimate/schedule.h"
#include "memtune/model/job.h"

namespace memtune::tensors {

// One parameter tensor of a layer kind on one rank (TP / EP sharding applied), as the
// layout reads it: `copies` identical tensors registered one after another (the local
// experts' weight0..weightN-1 of a grouped linear).
struct LayoutParam {
  std::int64_t elements = 0;  // of one tensor on the rank
  std::int32_t copies = 1;
  bool expert = false;            // expert-parallel buffer and optimizer
  bool fp8 = false;               // stored as fp8 (its own uint8 buffer)
  bool no_decay = false;          // biases and 1-D parameters: the no-weight-decay group
  bool shared_embedding = false;  // tied word embedding under PP: a bucket of its own
};

// The parameters of each part of the model in registration order (named_parameters:
// GPTModel embedding, decoder layers, final norm, MTP, output layer; in a layer
// input_layernorm, core_attention, linear_proj, linear_qkv, q/k norms, pre_mlp_layernorm,
// mlp), persistent buffers left out.
struct LayoutLists {
  std::vector<LayoutParam> layer[2][2];  // [moe][stored fp8] per transformer layer
  std::vector<LayoutParam> embedding, final_norm, output, mtp_extra;
  std::vector<LayoutParam> tied_output;  // the last stage's copy of a tied word embedding
  // Each list's elements per buffer kind (expert * 2 + fp8), and whether laying it out
  // needs no gap (every tensor a multiple of the 64-element alignment) and no bucket of its
  // own (no shared_embedding): then a one-bucket buffer is known from the sums alone.
  struct Sum {
    std::int64_t elements[4] = {};
    bool used[4] = {};  // the list has a tensor of that kind
    bool plain = true;
  };
  Sum layer_sum[2][2], embedding_sum, final_norm_sum, output_sum, mtp_extra_sum, tied_output_sum;
};

LayoutLists MakeLayoutLists(const model::Job& job);

// Parameter tensors of the whole model by `lists` (every layer counted as its largest kind,
// copies included), and the most a job may have for the layout to apply (real models have
// tens of thousands at most: 61 layers x 256 experts x 2 linears is 31,232).
std::int64_t LayoutTensorCount(const model::Job& job, const LayoutLists& lists);
inline constexpr std::int64_t kMaxLayoutTensors = 1000000;

// Whether model state follows this layout: Megatron-Core DDP with Megatron-Core's
// optimizers on the GPU (not Megatron-FSDP, not the precision-aware or CPU-offloaded
// optimizer, not PEFT, whose frozen base keeps no optimizer state; those keep the
// layer-granular model of model_state.h).
bool UsesParamLayout(const model::Job& job);

// One optimizer shard of DP rank 0 (main parameter, fp32 gradient copy, Adam moments).
struct OptShard {
  std::int64_t elements = 0;
  int chunk = 0;  // the model chunk (virtual stage) of the rank holding the parameter
  bool expert = false, fp8 = false;
};

// A rank's DDP buffers and the optimizer shards of DP rank 0.
struct OptLayout {
  // One DDP buffer (param_and_grad_buffer.py _ParamAndGradBuffer): its parameters' kind
  // and its elements, padded (the param buffer with the distributed optimizer and the grad
  // buffer are both this size).
  struct Buffer {
    bool expert = false, fp8 = false;
    std::int64_t numel = 0;
  };
  // Each model chunk's buffers, in creation order. Empty when only the sums were asked for.
  std::vector<std::vector<Buffer>> chunks;
  // Each model chunk's parameters as the model builds them (registration order, one entry
  // per tensor): elements on the rank and whether TE stores it in fp8. Empty when only the
  // sums were asked for.
  struct Param {
    std::int64_t elements = 0;
    bool fp8 = false;
  };
  std::vector<std::vector<Param>> params;
  // Shards in the order the optimizers allocate them: the dense optimizer, then the expert
  // one; in each, the weight-decay group then the no-decay group; in a group, chunk,
  // buffer, bucket, parameter. Empty when only the sums were asked for.
  std::vector<OptShard> shards;
  std::int64_t shard_elements[2][2] = {};   // sums of the shards, [expert][fp8]
  std::int64_t buffer_elements[2][2] = {};  // sums of the padded buffers, [expert][fp8]
};

// The layout of the rank holding `chunks` on pipeline rank `pp_rank`; `moe_pattern`:
// model::MoeLayerPattern (empty: every layer dense). `with_shards`: also list the shards
// (the synthesizer); the estimator needs only the sums.
OptLayout LayoutRank(const model::Job& job, const LayoutLists& lists,
                     const std::vector<bool>& moe_pattern,
                     std::span<const estimate::ModelChunk> chunks, int pp_rank, bool with_shards);

}  // namespace memtune::tensors
