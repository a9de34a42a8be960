// Activations one transformer layer keeps for backward, tensor by tensor, per micro-batch
// and per rank (memtune_tensors internal API; docs/estimator.md explains every tensor).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "memtune/model/job.h"

namespace memtune::tensors {

// The saved tensors memtune names. Bytes are per micro-batch on one rank.
enum ActTensor : int {
  kLn1Input,          // layer input (residual), saved for the input-norm backward
  kLn1Output,         // input-norm output = linear_qkv GEMM input, saved for its wgrad
  kAttnQkv,           // q, k, v core attention saves (activations.cc AttentionQkvWidth)
  kAttnQkNormInput,   // qk_layernorm: the q and k norms' inputs (copies) and fp32 rstdevs
  kAttnOut,           // attention output = linear_proj GEMM input
  kAttnSoftmaxStats,  // fused-attention softmax statistics (fp32)
  kAttnProbs,         // unfused attention: softmax output(s), [b, heads, sq, sk]
  kAttnProbsDropout,  // unfused attention: attention-dropout mask and output
  kAttnMlaLatent,     // MLA down-projection outputs (q/kv latents), saved by the up-projections
  kAttnDropoutMask,   // hidden-dropout mask after attention (bool)
  kLn2Input,          // pre-MLP residual, saved for the pre-MLP norm backward
  kLn2Output,         // pre-MLP norm output = linear_fc1 / router input
  kMlpFc1Out,         // linear_fc1 output = activation-function input
  kMlpActParts,       // unfused gated activation: act(x_glu) and x_linear + offset
  kMlpFc2In,          // activation output = linear_fc2 GEMM input
  kMlpDropoutMask,    // hidden-dropout mask after the MLP / MoE (bool)
  kMoeRouter,         // router logits and probabilities (fp32)
  kMoeDispatch,       // permuted tokens = expert linear_fc1 GEMM input
  kMoeFc1Out,         // expert linear_fc1 output = activation input
  kMoeActParts,       // unfused expert activation: the factors and output its products keep
  kMoeFc2In,          // expert activation output = expert linear_fc2 GEMM input
  kMoeCombine,        // expert outputs kept by the weighted un-permute (MCore < 0.13)
  kSharedFc1Out,      // shared-expert linear_fc1 output
  kSharedFc2In,       // shared-expert linear_fc2 input
  kSharedGateOut,     // shared-expert gate: the shared output (and gate score) its multiply keeps
  kSharedFc1Input,    // shared-expert overlap with SP: fc1's own all-gathered input
  kMoePermuteMap,     // the alltoall dispatcher's permutation map (int32 row map or int64 indices)
  kMoeLoraInput,      // MoE layer LoRA-A inputs: dispatched tokens, expert act output, shared
  kMoeLoraHidden,     // MoE layer LoRA-A outputs (rank-`dim` activations)
  kLoraInput,         // LoRA-A inputs the frozen base does not keep (gathered SP input)
  kLoraHidden,        // LoRA-A outputs (rank-`dim` activations)
  kDoraScaled,        // DoRA: each target's base + adapter output, kept by the magnitude multiply
  kPostNormInput,     // Gemma 2/3: linear_proj and linear_fc2 outputs, saved by their post norms
  kCheckpointInput,   // full recompute: the checkpointed unit's input
  kNumActTensors,
};

// Stable component name of a tensor ("act.ln1_input"), static storage.
const char* ActTensorName(ActTensor tensor);
// One-line explanation of a tensor, static storage.
const char* ActTensorExplanation(ActTensor tensor);
// The same two together, as views (lengths known: the estimator's hot path copies them).
struct ActTensorText {
  std::string_view name;  // views of literals: data() is NUL-terminated
  std::string_view explanation;
};
// Every tensor's name and explanation, indexed by ActTensor (defined in activations.cc).
extern const ActTensorText kActTensorTexts[kNumActTensors];
inline const ActTensorText& ActTensorTextOf(ActTensor tensor) { return kActTensorTexts[tensor]; }

using ActBytes = std::array<std::int64_t, kNumActTensors>;

// Everything the per-layer formulas need, resolved once per job.
struct ActContext {
  std::int64_t tokens = 0;  // s * b / CP: tokens of one micro-batch on one CP rank
  int tp = 1;               // TP
  int hid_div = 1;          // TP with sequence parallelism, else 1
  int etp = 1;              // expert TP
  std::int64_t h = 0, q_width = 0, kv_width_per_rank = 0, heads_per_rank = 0;
  std::int64_t qk_norm_rows = 0;  // qk_layernorm: local q heads + kv groups per token, else 0
  std::int64_t ffn = 0, moe_ffn = 0, shared_ffn = 0, topk = 1, experts = 0;
  int glu_factor = 1;           // 2 for gated MLPs (fc1 has two halves)
  bool dense_act_fused = true;  // MLP: fused_bias_swiglu / bias_gelu
  bool moe_act_fused = true;    // experts: weighted swiglu / quick-geglu
  // MCore >= 0.13: the experts' activation applies the router probabilities, so unpermute
  // keeps no expert outputs (model/versions.h McoreProbsInExperts).
  bool moe_probs_in_experts = true;
  int act_bytes = 2;  // activation dtype (bf16/fp16 2, fp32 4)
  // Without gradient_accumulation_fusion: the linear_fc1 weight gradient the backward
  // returns (bytes of one rank; a MoE layer's grouped GEMM returns every local expert's at
  // once), held until MCore's DDP hook adds it to main_grad. 0 with the fusion or PEFT.
  std::int64_t fc1_wgrad_dense = 0, fc1_wgrad_moe = 0;
  bool mla = false;
  std::int64_t mla_q_rank = 0, mla_kv_rank = 0, mla_qk_width = 0, mla_v_width = 0;
  std::int64_t mla_kv_lora = 0;   // kv_lora_rank alone (mla_kv_rank adds the rope part)
  bool mla_norm_linears = false;  // qk_layernorm: the up-projections are TE norm+linears
  double hidden_dropout = 0;
  // Unfused core attention (TE UnfusedDotProductAttention or MCore DotProductAttention):
  // bytes saved per attention-score element by the softmax, and by the attention dropout.
  bool unfused_attn = false;
  bool local_attn = false;  // MCore DotProductAttention (its persistent score buffer)
  bool rope = false;        // RoPE rotates q and k into new tensors
  bool post_norms = false;  // model.sublayer_post_norms (Gemma 2/3)
  bool gqa = false;         // fewer KV groups than heads (q is a reshape copy;
                            // unfused attention repeats k and v to every head)
  std::int64_t seq_k = 0;   // keys each query attends to (s / CP)
  int probs_bytes = 0, probs_dropout_bytes = 0;
  bool fp8 = false;          // fp8 GEMM inputs (TE) for fp8 layers
  bool fp8_delayed = false;  // delayed scaling: linear_proj saves its fp8 input
  bool frozen_base = false;  // PEFT: base linears do not save GEMM inputs
  bool recompute_core_attn = false, recompute_mlp = false, recompute_moe = false,
       recompute_moe_act = false, recompute_layernorm = false, recompute_mla_up = false,
       recompute_shared = false;
  // Shared experts: moe_shared_expert_gate (output * sigmoid(gate)); and
  // moe_shared_expert_overlap with SP under TP, where the shared expert all-gathers its input
  // itself and its linear_fc1 (parallel_mode None) keeps the gathered copy.
  bool shared_gate = false, shared_overlap_gather = false;
  // moe_shared_expert_overlap: the shared expert's forward runs on its own CUDA stream.
  bool shared_stream = false;
  bool te_act = false;  // use_te_activation_func: TE's activation ops (keep their input)
  // Bytes per local token the alltoall and allgather dispatchers' permutations keep for
  // backward (0 for flex, not modelled): the part sized by the local or gathered tokens, and
  // the part sized by the expert rows this rank receives (both per local token).
  std::int64_t permute_map_per_token = 0;
  std::int64_t permute_map_rows_per_token = 0;
  // Multiplies every tensor sized by the expert rows this rank computes (the received token
  // copies: dispatched tokens, expert activations and their gradients, the permuted
  // probabilities, the received rows' maps, the expert LoRA inputs). 1 is balanced routing;
  // moe_load.h evaluates the layer at 1 and 2 to split each size into a fixed part and a
  // part linear in the rows.
  std::int64_t rows_mult = 1;
  // Fine-grained activation offloading (offload_modules): which modules' saved inputs go to
  // the host after their forward and come back for their backward.
  bool off_norm1 = false, off_qkv = false, off_core_attn = false, off_proj = false,
       off_norm2 = false, off_expert_fc1 = false, off_moe_act = false;
  // LoRA (0 when absent): targets and whether the SP input re-gather applies.
  std::int64_t lora_dim = 0;
  std::int64_t lora_expert_dim = 0;      // the experts' adapters' rank (normalize_moe_lora)
  std::int64_t lora_expert_fc1_dim = 0;  // ... of linear_fc1 (rounded up to ETP)
  bool lora_qkv = false, lora_proj = false, lora_fc1 = false, lora_fc2 = false;
  bool lora_regather = false;
  bool dora = false;  // peft._target_ DoRA
};

// Builds the context from a job's effective values.
ActContext MakeActContext(const model::Job& job);

// Saved tensors of one layer (per micro-batch, per rank), selective recompute applied.
// `fp8_layer` false for bf16 layers of an fp8 run (first/last layers in bf16).
ActBytes LayerActivations(const ActContext& ctx, bool moe_layer, bool fp8_layer);

// The part of `kept` (LayerActivations of the same layer) that fine-grained activation
// offloading moves to the host between the layer's forward and backward (zero without it).
ActBytes OffloadedTensors(const ActContext& ctx, bool moe_layer, const ActBytes& kept);

// Largest backward working set of one layer (gradients, gathered GEMM inputs, fp8
// quantized gradients, and the selective-recompute replay), per micro-batch and rank.
std::int64_t LayerBackwardWorkspace(const ActContext& ctx, bool moe_layer, bool fp8_layer);
// The same, given the layer's LayerActivations(ctx, moe_layer, fp8_layer) (computed once).
std::int64_t LayerBackwardWorkspace(const ActContext& ctx, bool moe_layer, bool fp8_layer,
                                    const ActBytes& layer_activations);

// Input kept by one full-recompute checkpoint (the layer input, split over TP with
// distribute_saved_activations).
std::int64_t CheckpointInputBytes(const ActContext& ctx, bool distribute_saved);

// MCore dot_product_attention.py: get_global_memory_buffer().get_tensor(..., "mpu") keeps
// one [b, heads, sq, sk] tensor per rank for the rest of the run (0 unless local attention).
std::int64_t LocalAttentionScoreBuffer(const ActContext& ctx);

// Sum of a tensor table.
std::int64_t SumBytes(const ActBytes& bytes);

}  // namespace memtune::tensors
