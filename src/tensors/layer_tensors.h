// The transient (not saved-for-backward) tensors of one transformer layer, tensor by
// tensor, per micro-batch and per rank: the forward's communication buffers, GEMM outputs
// and fp8 casts, and the backward's gradient working set. Together with LayerActivations
// (activations.h, the saved tensors) this is the one per-tensor model that both the
// accurate estimator (LayerBackwardWorkspace) and the trace synthesizer (src/synth/) use.
// Added by the trace-synthesis work (docs/estimator.md "Transients").
#pragma once

#include <array>
#include <cstdint>

#include "tensors/activations.h"

namespace memtune::tensors {

// Forward transients, in the order a TE dense layer creates them. Each is freed within
// the layer's forward (communication buffers after the GEMM, GEMM outputs after the
// reduce-scatter, bf16 activations after their fp8 cast).
enum FwdTransient : int {
  kFwdLn1Gather,       // SP all-gather of the input-norm output (linear_qkv GEMM input)
  kFwdAttnScoreInput,  // unfused TE attention: the torch.empty baddbmm is given (freed after it)
  kFwdAttnScores,      // unfused attention: raw scores [b, heads, sq, sk] until the softmax
  kFwdProjInCast,      // fp8 cast of the attention output (linear_proj GEMM input)
  kFwdProjOut,         // linear_proj GEMM output before the SP reduce-scatter (full tokens)
  kFwdProjScatter,     // linear_proj reduce-scatter output (local tokens), before the residual add
  kFwdLn2Gather,       // SP all-gather of the pre-MLP norm output (linear_fc1 GEMM input)
  kFwdActOut,          // activation-function output in bf16 before its fp8 cast
  kFwdMoeDispatch,     // MoE all-to-all / all-gather dispatch buffer (tokens sent to experts)
  kFwdMoeCombine,      // MoE combine buffer (expert outputs on their way back)
  kFwdFc2Out,          // linear_fc2 GEMM output before the SP reduce-scatter (full tokens)
  kFwdFc2Scatter,      // linear_fc2 reduce-scatter output (local tokens)
  kNumFwdTransients,
};

// Backward working set of one layer, all live at the MLP backward's peak (the first five
// at once; see docs/estimator.md). Bytes per micro-batch on one rank.
enum BwdTransient : int {
  kBwdGradOut,        // incoming gradient of the layer output (local tokens)
  kBwdGradGather,     // SP all-gather of that gradient (linear_fc2 dgrad input)
  kBwdGradFc2In,      // gradient of the linear_fc2 input
  kBwdGradFc1Out,     // gradient of the linear_fc1 output (activation backward)
  kBwdGradFc1OutFp8,  // its fp8 cast (linear_fc1 dgrad/wgrad input), fp8 layers only
  kBwdFc1InGather,    // SP re-gather of the saved linear_fc1 input for the wgrad
  kBwdFc1Wgrad,       // the linear_fc1 weight gradient, without gradient_accumulation_fusion
  kBwdFc1Dgrad,       // linear_fc1 dgrad output before the SP reduce-scatter (full tokens)
  kNumBwdTransients,
};

// Attention backward working set (after the MLP's is freed): the gathered output gradient
// is the MLP's kBwdGradGather size; these are the attention-specific tensors.
enum AttnBwdTransient : int {
  kAttnBwdGradOut,     // gradient of the attention output (linear_proj dgrad output)
  kAttnBwdGradProbs,   // unfused attention: gradient of the probabilities (context GEMM)
  kAttnBwdGradScores,  // unfused attention: dropout / fp32-softmax backward outputs
  kAttnBwdGradQkv,     // fused-attention dq, dk, dv (the linear_qkv output gradient)
  kAttnBwdLn1Gather,   // SP re-gather of the saved linear_qkv input for the wgrad
  kAttnBwdQkvDgrad,    // linear_qkv dgrad output before the SP reduce-scatter (full tokens)
  kNumAttnBwdTransients,
};

using AttnBwdBytes = std::array<std::int64_t, kNumAttnBwdTransients>;
const char* AttnBwdTransientName(AttnBwdTransient tensor);
// Attention backward working set of one layer (per micro-batch, per rank).
AttnBwdBytes LayerAttentionBackwardTransients(const ActContext& ctx, bool fp8_layer);

using FwdBytes = std::array<std::int64_t, kNumFwdTransients>;
using BwdBytes = std::array<std::int64_t, kNumBwdTransients>;

// Stable names ("fwd.ln1_gather", "bwd.grad_out"), static storage.
const char* FwdTransientName(FwdTransient tensor);
const char* BwdTransientName(BwdTransient tensor);

// Sums of the tables.
std::int64_t SumBytes(const FwdBytes& bytes);
std::int64_t SumBytes(const BwdBytes& bytes);

// Forward transients of one layer (per micro-batch, per rank). Zero for tensors the
// configuration does not create (no SP: no gathers; bf16 layer: no casts).
FwdBytes LayerForwardTransients(const ActContext& ctx, bool moe_layer, bool fp8_layer);

// Backward working set of one layer without the recompute replay; its sum plus the
// replayed bytes is LayerBackwardWorkspace.
BwdBytes LayerBackwardTransients(const ActContext& ctx, bool moe_layer, bool fp8_layer);

// Tensors selective recompute drops in forward and re-creates in backward:
// LayerActivations without recompute minus LayerActivations with it, tensor by tensor.
ActBytes LayerRecomputedTensors(const ActContext& ctx, bool moe_layer, bool fp8_layer);
// The same, given the layer's LayerActivations(ctx, moe_layer, fp8_layer) (computed once).
ActBytes LayerRecomputedTensors(const ActContext& ctx, bool moe_layer, bool fp8_layer,
                                const ActBytes& kept);

}  // namespace memtune::tensors
