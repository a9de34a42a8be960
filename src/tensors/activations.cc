// Per-layer saved activations (docs/estimator.md "Activations"). Every tensor cites the
// Megatron-LM (d98e8a6) / TransformerEngine (d0067d0) code that keeps it.
#include "tensors/activations.h"

#include <algorithm>
#include <bit>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/model/parameters.h"
#include "memtune/model/versions.h"
#include "tensors/layer_tensors.h"
#include "tensors/lora_rank.h"

namespace memtune::tensors {

constexpr ActTensorText kActTensorTexts[kNumActTensors] = {
    {"act.ln1_input",
     "layer input saved for the input-norm backward (TE LayerNormLinear inputmat)"},
    {"act.ln1_output",
     "input-norm output saved for the linear_qkv wgrad (fp8 local shard under SP)"},
    {"act.attn_qkv",
     "q, k and v kept by core attention (TE copies v; a checkpoint's v view keeps the linear_qkv "
     "output)"},
    {"act.attn_qk_norm_input",
     "qk_layernorm: query and key copies saved by the q/k norms, with their fp32 rstdevs"},
    {"act.attn_out", "attention output saved as the linear_proj GEMM input"},
    {"act.attn_softmax_stats", "fused-attention softmax statistics (fp32, per head and token)"},
    {"act.attn_probs",
     "unfused attention: softmax probabilities [b, heads, s, s] saved for backward"},
    {"act.attn_probs_dropout",
     "unfused attention: attention-dropout mask and dropped probabilities"},
    {"act.attn_mla_latent", "MLA q/kv down-projection outputs saved by the up-projections"},
    {"act.attn_dropout_mask", "hidden-dropout mask after attention (1 B per element)"},
    {"act.ln2_input", "pre-MLP residual saved for the pre-MLP norm backward"},
    {"act.ln2_output", "pre-MLP norm output (linear_fc1 wgrad input, router/expert input)"},
    {"act.mlp_fc1_out", "linear_fc1 output saved by the fused bias-activation (SwiGLU/GeLU)"},
    {"act.mlp_act_parts",
     "unfused gated activation: act(x_glu) and x_linear, saved by their product"},
    {"act.mlp_fc2_in", "activation output saved as the linear_fc2 GEMM input"},
    {"act.mlp_dropout_mask", "hidden-dropout mask after the MLP (1 B per element)"},
    {"act.moe_router", "router logits and probabilities (fp32)"},
    {"act.moe_dispatch", "permuted tokens saved as the expert linear_fc1 input (top-k copies)"},
    {"act.moe_fc1_out", "expert linear_fc1 output saved by the expert activation"},
    {"act.moe_act_parts",
     "unfused expert activation: the gated factors and (MCore >= 0.13) its output, saved by "
     "their products"},
    {"act.moe_fc2_in", "expert activation output saved as the expert linear_fc2 input"},
    {"act.moe_combine",
     "expert outputs kept by the probability-weighted un-permute (Megatron-Core < 0.13)"},
    {"act.shared_fc1_out", "shared-expert linear_fc1 output"},
    {"act.shared_fc2_in", "shared-expert linear_fc2 input"},
    {"act.shared_gate_out",
     "shared-expert gate: the shared output and gate score kept by output * gate_score"},
    {"act.shared_fc1_input",
     "shared-expert overlap under SP: linear_fc1's input, all-gathered by the shared expert"},
    {"act.moe_permute_map",
     "the token permutation's map kept for its backward and the un-permute (TE fused: int32 "
     "[tokens, 2E + 1]; unfused: int64 sorted indices, one per copy); allgather dispatcher: "
     "over the gathered tokens and local experts, plus the local probabilities' masked_select "
     "input and mask"},
    {"act.moe_lora_input",
     "MoE layer LoRA-A inputs: the dispatched tokens and expert activation output the expert "
     "adapters keep, the shared-expert adapters' inputs"},
    {"act.moe_lora_hidden", "MoE layer LoRA-A outputs (rank-dim activations) saved by LoRA-B"},
    {"act.lora_input", "LoRA-A inputs (SP-gathered norm output unless re-gather applies)"},
    {"act.lora_hidden", "LoRA-A outputs (rank-dim activations) saved by LoRA-B"},
    {"act.dora_scaled",
     "DoRA: each target's base plus adapter output, kept by mag_norm_scale * (...)"},
    {"act.post_norm_input",
     "linear_proj and linear_fc2 outputs saved by their post norms (Gemma "
     "TERowParallelLinearLayerNorm)"},
    {"act.checkpoint_input", "full recompute: inputs of the checkpointed layers"},
};

namespace {

// (string_view: the literal's length is known, so most names differ by size alone.)
bool Contains(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool Has(const model::ModelConfig& m, std::string_view module) {
  return Contains(m.recompute_modules, module);
}

bool Targets(const model::PeftConfig& p, std::string_view module) {
  return Contains(p.target_modules, module);
}

// Bridge peft/utils.py _sequence_parallel_input_regather_eligibility (megatron.md §6).
bool RegatherEligible(const model::Job& job) {
  const auto& m = job.model;
  if (!job.peft || !job.peft->sequence_parallel_input_regather) return false;
  if (!m.sequence_parallel || m.tensor_model_parallel_size <= 1) return false;
  if (m.cpu_offloading && m.cpu_offloading_activations) return false;
  if (m.cuda_graph_impl != model::CudaGraphImpl::kNone) return false;
  if (m.recompute_granularity == model::RecomputeGranularity::kFull) return false;
  return true;
}

// Elements per token of q, k, v (and what they keep alive) saved by the core attention.
// MCore attention.py get_query_key_value_tensors splits the linear_qkv output (mixed_qkv)
// into views; with GQA the query's reshape cannot be a view (a copy); RoPE writes new q and
// k. The value is always a view of mixed_qkv, so whoever saves it keeps all of mixed_qkv.
//  - core_attn recompute: the checkpoint saves MCore's q, k, v as they are.
//  - TE attention: get_qkv_layout (attention/dot_product_attention/utils.py) accepts views
//    only in a packed layout (MHA without RoPE: sbh3d, nothing copied); otherwise it makes
//    q, k, v contiguous, so v is copied and mixed_qkv freed: q + 2kv either way.
//  - unfused attention with GQA repeats k and v to every head and saves those copies (TE
//    backends.py UnfusedDotProductAttention, MCore dot_product_attention.py): 3q.
//  - MCore's local attention without GQA saves MCore's q, k, v as they are.
// What MLA's up-projections keep per token (Megatron-LM d98e8a64 gpt_layer_specs.py
// get_gpt_layer_with_transformer_engine_submodules, mla_qk_norm_config.py
// _resolve_mla_qk_layernorm, multi_latent_attention.py get_query_key_value_tensors). The
// down-projections run on the sequence shard under SP, so their outputs, q_compressed and
// kv_compressed (a split of the kv output, TE's input copy), are local. With qk_layernorm the
// up-projections are TE norm+linears (column_parallel_layer_norm_linear): each keeps its
// input for the norm backward, its own norm output (ln_out, local under SP) for the weight
// gradient and an fp32 rstdev per token; without a q LoRA the resolver makes linear_q_proj
// that norm+linear over the hidden states, whose input the down-projection keeps already.
// Without qk_layernorm they are column-parallel linears keeping their input. A frozen base
// keeps no input for a weight gradient (the norm inputs stay). RoPE on the k position part
// keeps only its cos/sin, so that part is not kept.
std::int64_t MlaUpProjectionSaved(const ActContext& c, bool fp8_layer) {
  const std::int64_t act = c.act_bytes, gemm_in = fp8_layer ? 1 : c.act_bytes;
  const std::int64_t wgrad_in = c.frozen_base ? 0 : gemm_in;
  std::int64_t per_token = 0;
  if (c.mla_norm_linears) {
    per_token += (act + wgrad_in) * c.mla_kv_lora + 4;  // kv_up: input copy, ln_out, rstdev
    if (c.mla_q_rank > 0) {
      per_token += (act + wgrad_in) * c.mla_q_rank + 4;  // q_up over q_compressed
    } else {
      per_token += wgrad_in * c.h + 4;  // linear_q_proj's own norm output over the hidden
    }
  } else {
    per_token += wgrad_in * (c.mla_q_rank + c.mla_kv_lora);
  }
  return per_token / c.hid_div;
}

std::int64_t AttentionQkvWidth(const ActContext& c) {
  const std::int64_t q = c.q_width / c.tp, kv = c.kv_width_per_rank, mixed = q + 2 * kv;
  const std::int64_t as_given = (c.rope || c.gqa ? q : 0) + (c.rope ? kv : 0) + mixed;
  if (c.recompute_core_attn) return as_given;
  if (c.unfused_attn && c.gqa) return 3 * q;
  if (c.local_attn) return as_given;
  return mixed;
}

void FillAttention(const ActContext& c, bool fp8_layer, ActBytes& a) {
  const std::int64_t act = c.act_bytes, gemm_in = fp8_layer ? 1 : c.act_bytes;
  const std::int64_t hid = c.h / c.hid_div;
  a[kLn1Input] = act * hid;
  // TE layernorm_linear.py forward: ln_out (the local shard; fp8 keeps its quantized copy)
  // is saved for backward, and cleared only when the weight is frozen and the norm output
  // is not returned. A LoRA adapter on linear_qkv makes the frozen base return it
  // (Bridge peft/utils.py: return_layernorm_output=True), so TE keeps it then too.
  a[kLn1Output] = c.frozen_base && !c.lora_qkv ? 0 : gemm_in * hid;
  const std::int64_t q = c.q_width / c.tp;
  if (c.mla) {
    // MCore multi_latent_attention.py qkv_up_proj_and_rope_apply: the up-projection outputs
    // (linear_q_proj / linear_q_up_proj and linear_kv_up_proj) are split into views, RoPE'd
    // and concatenated into new q, k and a contiguous v (nope+rope per local head), which
    // the core attention saves; no op keeps the up-projection outputs themselves (cat,
    // split and the RoPE multiplies by cos/sin save none of them). With mla_up_proj
    // recompute q, k, v come from a CheckpointWithoutOutput whose
    // discard_output_and_register_recompute frees their storage once core attention has
    // run, although core attention saved them: recomputed in backward.
    a[kAttnQkv] =
        c.recompute_mla_up ? 0 : act * c.heads_per_rank * (2 * c.mla_qk_width + c.mla_v_width);
    a[kAttnMlaLatent] = c.recompute_mla_up ? act * (c.mla_q_rank + c.mla_kv_rank)  // inputs
                                           : MlaUpProjectionSaved(c, fp8_layer);
  } else {
    a[kAttnQkv] = act * AttentionQkvWidth(c);
    // attention.py get_query_key_value_tensors: q_layernorm / k_layernorm (TENorm) normalize
    // the split query and key. TE's norm (ops/basic/rmsnorm.py, layernorm.py) saves its
    // input made contiguous (key is a strided view of mixed_qkv: a copy; query with GQA is
    // already a reshape copy) and the fp32 rstdevs, one per head row.
    a[kAttnQkNormInput] =
        act * (q + c.kv_width_per_rank) * (c.qk_norm_rows > 0 ? 1 : 0) + 4 * c.qk_norm_rows;
  }
  const std::int64_t out_width = c.mla ? c.heads_per_rank * c.mla_v_width : q;
  // attention.py set_save_original_input(linear_proj) for non-delayed fp8 (TE >= 2.6):
  // linear_proj keeps the bf16 attention output; delayed scaling keeps an fp8 copy, and
  // without core_attn recompute the fused attention keeps its bf16 output too.
  std::int64_t out = act * out_width;
  if (fp8_layer && c.fp8_delayed) out = c.recompute_core_attn ? out_width : out + out_width;
  if (c.frozen_base && c.recompute_core_attn) out = 0;
  a[kAttnOut] = out;
  if (c.unfused_attn) {
    // [b, heads, sq, sk] per micro-batch = tokens x heads x sk (docs/estimator.md).
    const std::int64_t scores = c.recompute_core_attn ? 0 : c.heads_per_rank * c.seq_k;
    a[kAttnProbs] = c.probs_bytes * scores;
    a[kAttnProbsDropout] = c.probs_dropout_bytes * scores;
  } else {
    a[kAttnSoftmaxStats] = c.recompute_core_attn ? 0 : 4 * c.heads_per_rank;
  }
  a[kAttnDropoutMask] = c.hidden_dropout > 0 ? hid : 0;
}

void FillDenseMlp(const ActContext& c, bool fp8_layer, ActBytes& a) {
  const std::int64_t act = c.act_bytes, gemm_in = fp8_layer ? 1 : c.act_bytes;
  const std::int64_t hid = c.h / c.hid_div, f = c.ffn / c.tp;
  a[kLn2Input] = act * hid;
  if (!c.recompute_mlp) {  // transformer_layer.py: "mlp" checkpoints the MLP, keeping its input
    a[kLn2Output] = c.frozen_base && !c.lora_fc1 ? 0 : gemm_in * hid;  // as kLn1Output
    a[kMlpFc1Out] = act * c.glu_factor * f;  // fused_bias_swiglu.py SwiGLUFunction saves input
    // mlp.py glu(): silu(x_glu) * (x_linear + offset) saves both factors (gated, unfused).
    if (!c.dense_act_fused && c.glu_factor == 2) a[kMlpActParts] = act * 2 * f;
    // TE linear.py: the fc2 input is kept column-wise (fp8) for the wgrad.
    a[kMlpFc2In] = c.frozen_base ? 0 : gemm_in * f;
  }
  a[kMlpDropoutMask] = c.hidden_dropout > 0 ? hid : 0;
}

void FillMoe(const ActContext& c, bool fp8_layer, ActBytes& a) {
  const std::int64_t act = c.act_bytes, gemm_in = fp8_layer ? 1 : c.act_bytes;
  const std::int64_t hid = c.h / c.hid_div;
  a[kLn2Input] = act * hid;
  a[kMlpDropoutMask] = c.hidden_dropout > 0 ? hid : 0;
  // pre_mlp_layernorm is a separate TENorm on MoE layers; "moe" checkpoints the MoE layer
  // keeping this output as its input; "layernorm" discards it (transformer_layer.py).
  a[kLn2Output] = (c.recompute_layernorm && !c.recompute_moe) ? 0 : act * hid;
  if (c.recompute_moe) return;
  // Balanced routing: every rank computes top-k copies of its local tokens (times ETP,
  // whose ranks share the tokens), on f_e / ETP columns; rows_mult scales the rows received.
  const std::int64_t copies_per_token = c.topk * c.etp;  // per local (SP) token
  const std::int64_t rows = copies_per_token * c.rows_mult;
  // router.py: fp32 logits + probs; the dispatcher's permuted fp32 probs (one per copy)
  // are kept by their multiply, in the experts' activation (MCore >= 0.13) or in unpermute.
  a[kMoeRouter] = (2 * 4 * c.experts + 4 * rows) / c.hid_div;
  a[kMoePermuteMap] =
      (c.permute_map_per_token + c.permute_map_rows_per_token * c.rows_mult) / c.hid_div;
  a[kMoeDispatch] = c.frozen_base ? 0 : gemm_in * c.h * rows / c.hid_div;
  const std::int64_t fe = c.moe_ffn / c.etp;
  a[kMoeFc1Out] = act * c.glu_factor * fe * rows / c.hid_div;
  // experts.py bias_act_func, unfused: a gated activation keeps act(x_glu) and x_linear +
  // offset for their product; MCore >= 0.13 then multiplies the fp32 probabilities in, which
  // keeps the activation output too (model/versions.h McoreProbsInExperts).
  // TE's activation op keeps only its input; the probabilities' multiply after it keeps
  // the op's output (experts.py bias_act_func, use_te_activation_func).
  if (c.te_act && !c.recompute_moe_act) {
    a[kMoeActParts] = c.moe_probs_in_experts ? act * fe * rows / c.hid_div : 0;
  } else if (!c.moe_act_fused && !c.recompute_moe_act) {
    const int parts = (c.glu_factor == 2 ? 2 : 0) + (c.moe_probs_in_experts ? 1 : 0);
    a[kMoeActParts] = act * parts * fe * rows / c.hid_div;
  }
  a[kMoeFc2In] = (c.recompute_moe_act || c.frozen_base) ? 0 : gemm_in * fe * rows / c.hid_div;
  // MCore < 0.13: moe_utils.py unpermute(probs=...) (TE moe_unpermute with merging_probs, or
  // permuted_tokens * permuted_probs) keeps the expert outputs for the probs' gradient.
  a[kMoeCombine] = c.moe_probs_in_experts ? 0 : act * c.h * rows / c.hid_div;
  if (c.shared_ffn > 0 && !c.recompute_shared) {
    const std::int64_t fs = c.shared_ffn / c.tp;
    a[kSharedFc1Out] = act * c.glu_factor * fs;
    a[kSharedFc2In] = c.frozen_base ? 0 : gemm_in * fs;
    // shared_experts.py forward / get_output (Megatron-LM d98e8a64): `output * gate_score`
    // keeps the shared output (fc2's, reduce-scattered under SP) and the [tokens, 1] score
    // (the sigmoid's output, which its backward keeps too).
    if (c.shared_gate) a[kSharedGateOut] = act * (c.h + 1) / c.hid_div;
    // pre_forward_comm: gather_from_sequence_parallel_region(input) on the shared-expert
    // stream, fc1 with parallel_mode None keeps that full-sequence copy (bf16: TE >= 2.6
    // save_original_input under fp8; a frozen base keeps no input for a wgrad).
    if (c.shared_overlap_gather && !c.frozen_base) a[kSharedFc1Input] = act * c.h;
  }
}

// LoRA on a MoE layer (Bridge 067f987d peft/lora.py, peft/utils.py ParallelLinearAdapter,
// lora_layers.py LoRALinear): LoRALinear hands the adapter the base's input.
// - The experts' grouped linear_fc1 / linear_fc2 (is_expert: no SP communication, expert TP):
//   LoRA-A's linear_in saves its input for its wgrad, the dispatched tokens (fc1) or the
//   expert activation output (fc2), in bf16, tensors the frozen grouped base does not keep;
//   LoRA-B's linear_out saves LoRA-A's output, [tokens x topk, rank]. `moe_act` recompute
//   frees the activation output (CheckpointWithoutOutput) and with it fc2's saved input.
// - shared_experts.linear_fc1 / linear_fc2 are ordinary TE column / row linears: under SP
//   the adapter gathers the local norm output itself (gather_from_sequence_parallel_region)
//   and keeps the gathered copy unless re-gather applies; without SP it keeps the norm
//   output the router keeps too. fc2's adapter keeps the shared activation output.
// The per-expert and shared-outer variants save inputs of the same sizes (an approximation:
// their grouped projections keep each expert's slice of the same tensors).
void FillMoeLora(const ActContext& c, ActBytes& a) {
  const std::int64_t act = c.act_bytes;
  const std::int64_t copies = c.topk * c.etp * c.rows_mult;  // expert rows per local token
  const std::int64_t fe = c.moe_ffn / c.etp;
  std::int64_t input = 0, hidden = 0;
  if (c.lora_fc1) {
    input += act * c.h * copies / c.hid_div;
    hidden += act * c.lora_expert_fc1_dim * copies / c.hid_div;
  }
  if (c.lora_fc2) {
    if (!c.recompute_moe_act) input += act * fe * copies / c.hid_div;
    hidden += act * c.lora_expert_dim * copies / c.hid_div;
  }
  if (c.shared_ffn > 0 && !c.recompute_shared) {
    if (c.lora_fc1) {
      // With the overlap the adapter takes the shared expert's own gathered copy and cannot
      // re-gather (Bridge 067f987d peft/utils.py get_adapter_attributes_from_linear:
      // parallel_mode None disables the sequence-parallel communication).
      const bool gathered = c.shared_overlap_gather || (c.hid_div > 1 && !c.lora_regather);
      input += gathered ? act * c.h : 0;
      hidden += act * c.lora_dim;
    }
    if (c.lora_fc2) {
      input += act * c.shared_ffn / c.tp;
      hidden += act * c.lora_dim;
    }
  }
  a[kMoeLoraInput] = input;
  a[kMoeLoraHidden] = hidden;
}

void FillLora(const ActContext& c, bool moe_layer, bool fp8_layer, ActBytes& a) {
  if (c.lora_dim <= 0) return;
  const std::int64_t act = c.act_bytes;
  int targets = 0;
  std::int64_t input = 0;
  // peft/utils.py get_adapter_attributes_from_linear: column-parallel adapters consume the
  // norm output their TE base returns. Under SP without re-gather that is the gathered copy
  // (return_layernorm_output_gathered: its own tensor, beside TE's saved local shard).
  // Otherwise it is the local ln_out TE saves (kLn1Output / kLn2Output) and LoRA-A's ctx
  // holds the same tensor, unless TE saved an fp8 copy: then the bf16 one is kept too.
  const std::int64_t column = c.hid_div > 1 && !c.lora_regather ? act * c.h
                              : fp8_layer                       ? act * c.h / c.hid_div
                                                                : 0;
  if (c.lora_qkv) {
    input += column;
    ++targets;
  }
  if (c.lora_fc1 && !moe_layer && !c.recompute_mlp) {
    input += column;
    ++targets;
  }
  if (c.lora_proj) {
    ++targets;
    if (c.recompute_core_attn) input += act * c.q_width / c.tp;
  }
  if (c.lora_fc2 && !moe_layer && !c.recompute_mlp) {
    input += act * c.ffn / c.tp;
    ++targets;
  }
  a[kLoraInput] = input;
  a[kLoraHidden] = act * c.lora_dim * targets;
  // Bridge 067f987d peft/dora_layers.py DoRALinear.forward: `mag_norm_scale * (linear_output
  // + adapter_output)` keeps the sum (the magnitude is trained): the target's output, the
  // full sequence on its local columns for linear_qkv / linear_fc1, the sequence shard
  // (reduce-scattered under SP) of the hidden size for linear_proj / linear_fc2.
  if (c.dora && !c.mla) {
    std::int64_t out = 0;
    if (c.lora_qkv) out += act * AttentionQkvWidth(c);
    if (c.lora_proj) out += act * c.h / c.hid_div;
    if (c.lora_fc1 && !moe_layer && !c.recompute_mlp) out += act * c.glu_factor * c.ffn / c.tp;
    if (c.lora_fc2 && !moe_layer && !c.recompute_mlp) out += act * c.h / c.hid_div;
    a[kDoraScaled] = out;
  }
  if (moe_layer && !c.recompute_moe) FillMoeLora(c, a);
}

// TE attention/dot_product_attention/softmax.py and MCore fusions/fused_softmax.py
// is_kernel_available: the fused scaled-masked-softmax kernel runs for half-precision
// scores with these shapes (batch_per_block follows the kernel's launch geometry).
bool SoftmaxKernelRuns(const model::Job& job, const ActContext& c, bool local) {
  const auto& m = job.model;
  if (c.act_bytes != 2) return false;
  if (local && !m.masked_softmax_fusion) return false;
  const std::int64_t sq = c.seq_k, sk = c.seq_k;
  const std::int64_t batches = job.train.micro_batch_size * c.heads_per_rank;
  const std::int64_t pow2 = static_cast<std::int64_t>(
      std::bit_ceil(static_cast<std::uint64_t>(std::max<std::int64_t>(1, sk))));
  const std::int64_t warp = std::min<std::int64_t>(pow2, 32);
  const std::int64_t per_block = (128 / warp) * (pow2 <= 128 ? 2 : 1);
  if (local) {  // causal: ScaledUpperTriangMaskedSoftmax
    return sk > 16 && sk <= 4096 && sq % 4 == 0 && sk % 4 == 0 && batches % 4 == 0 &&
           batches % per_block == 0;
  }
  return sk > 16 && sk < 16384 && sk % 8 == 0 && sq > 1 && sq % 4 == 0 && batches % 4 == 0 &&
         sq % per_block == 0;
}

// Bytes per attention-score element the unfused softmax and dropout keep. The fused kernel
// saves its half-precision output; the torch fallback (softmax_in_fp32, always on in TE)
// saves the fp32 softmax and the half copy the context GEMM reads. Attention dropout
// (p > 0) adds its bool mask and its output, which the context GEMM then saves instead.
void FillUnfusedAttention(const model::Job& job, ActContext& c) {
  const auto& m = job.model;
  const model::CoreAttention core = model::CoreAttentionOf(m);
  if (core == model::CoreAttention::kFused) return;
  c.unfused_attn = true;
  c.local_attn = core == model::CoreAttention::kLocal;
  c.seq_k = m.seq_length / std::max(1, m.context_parallel_size);
  const bool kernel = SoftmaxKernelRuns(job, c, c.local_attn);
  const bool fp32_softmax =
      !kernel && c.act_bytes == 2 && (!c.local_attn || m.attention_softmax_in_fp32);
  const bool dropout = m.attention_dropout > 0;
  c.probs_bytes = fp32_softmax ? 4 + (dropout ? 0 : c.act_bytes) : c.act_bytes;
  c.probs_dropout_bytes = dropout ? 1 + c.act_bytes : 0;
}

}  // namespace

const char* ActTensorName(ActTensor tensor) { return kActTensorTexts[tensor].name.data(); }
const char* ActTensorExplanation(ActTensor tensor) {
  return kActTensorTexts[tensor].explanation.data();
}

ActContext MakeActContext(const model::Job& job) {
  const auto& m = job.model;
  ActContext c;
  const int cp = std::max(1, m.context_parallel_size);
  c.tokens = m.seq_length * job.train.micro_batch_size / cp;
  c.tp = std::max(1, m.tensor_model_parallel_size);
  c.hid_div = m.sequence_parallel ? c.tp : 1;
  c.etp = model::ExpertTensorParallelSize(job);
  c.h = m.hidden_size;
  const std::int64_t d = model::EffectiveKvChannels(m), g = model::EffectiveQueryGroups(m);
  c.q_width = m.num_attention_heads * d;
  c.kv_width_per_rank = (g >= c.tp ? g / c.tp : 1) * d;  // groups < TP are replicated
  c.heads_per_rank = m.num_attention_heads / c.tp;
  if (m.qk_layernorm)
    c.qk_norm_rows = c.heads_per_rank + c.kv_width_per_rank / std::max<std::int64_t>(1, d);
  c.ffn = model::EffectiveFfnHiddenSize(m);
  c.moe_ffn = model::EffectiveMoeFfnHiddenSize(m);
  c.shared_ffn = m.moe_shared_expert_intermediate_size.value_or(0);
  c.topk = m.moe_router_topk;
  c.experts = m.num_moe_experts.value_or(0);
  c.glu_factor = m.gated_linear_unit ? 2 : 1;
  // mlp.py / experts.py: which activations have a fused kernel (others run unfused).
  const bool silu_glu = m.activation_func == "silu" && m.gated_linear_unit;
  c.dense_act_fused = m.bias_activation_fusion && (silu_glu || m.activation_func == "gelu");
  // use_te_activation_func with the TE layer spec (gpt_layer_specs.py: the spec provider's
  // activation_func builder; extensions/transformer_engine.py TEActivationOp, TE >= 1.13):
  // TE's SwiGLU / GEGLU / GELU / ReLU op keeps its input alone (mlp.py, experts.py
  // bias_act_func take it before bias_activation_fusion). TEActivationOp refuses other
  // activations.
  c.te_act = m.use_te_activation_func &&
             m.transformer_impl == model::TransformerImpl::kTransformerEngine &&
             (m.activation_func == "silu" || m.activation_func == "gelu");
  if (c.te_act) c.dense_act_fused = true;
  c.moe_probs_in_experts = model::McoreProbsInExperts(job);
  c.moe_act_fused = m.bias_activation_fusion &&
                    (silu_glu || (m.activation_func == "quick_gelu" && m.gated_linear_unit));
  c.act_bytes = (m.bf16 || m.fp16) ? 2 : 4;
  // TE linear.py / layernorm_linear.py / grouped_linear.py backward without
  // fuse_wgrad_accumulation: the wgrad GEMM writes a new activation-dtype tensor of the
  // weight's shape (GroupedLinear: one per local expert, allocated together) and returns it
  // as the weight's gradient; distributed_data_parallel.py's hook adds it to main_grad and
  // drops it. With fuse_wgrad_accumulation, TE < 2.3 returns a new torch.empty of the same
  // shape in its place (model/versions.h TeCachesDummyWgrad), dropped the same way. PEFT's
  // frozen base computes none.
  const bool wgrad_tensor = !m.gradient_accumulation_fusion || !model::TeCachesDummyWgrad(job);
  if (wgrad_tensor && !job.peft) {
    // (SequentialMLP without moe_grouped_gemm: one TE linear per expert, each gradient
    // dropped by its hook before the next expert's backward.)
    const std::int64_t local_experts =
        m.moe_grouped_gemm ? c.experts / std::max(1, m.expert_model_parallel_size) : 1;
    const std::int64_t expert_in = m.moe_latent_size.value_or(c.h);
    c.fc1_wgrad_dense = std::int64_t{c.act_bytes} * c.glu_factor * (c.ffn / c.tp) * c.h;
    c.fc1_wgrad_moe =
        std::int64_t{c.act_bytes} * local_experts * c.glu_factor * (c.moe_ffn / c.etp) * expert_in;
  }
  c.mla = m.multi_latent_attention;
  c.mla_q_rank = m.q_lora_rank.value_or(0);
  c.mla_kv_rank = m.kv_lora_rank + m.qk_pos_emb_head_dim;
  c.mla_kv_lora = m.kv_lora_rank;
  c.mla_norm_linears = m.qk_layernorm;
  c.mla_qk_width = m.qk_head_dim + m.qk_pos_emb_head_dim;
  c.mla_v_width = m.v_head_dim;
  c.hidden_dropout = m.hidden_dropout;
  c.rope = m.position_embedding_type == model::PositionEmbedding::kRope ||
           m.position_embedding_type == model::PositionEmbedding::kYarn ||
           m.position_embedding_type == model::PositionEmbedding::kMrope;
  c.gqa = g < m.num_attention_heads;
  c.post_norms = m.sublayer_post_norms;
  FillUnfusedAttention(job, c);
  c.fp8 = m.fp8 != model::Fp8Format::kNone;
  c.fp8_delayed = m.fp8_recipe == model::Fp8Recipe::kDelayed;
  const bool selective = m.recompute_granularity == model::RecomputeGranularity::kSelective;
  c.recompute_core_attn = selective && Has(m, "core_attn");
  c.recompute_mlp = selective && Has(m, "mlp");
  c.recompute_moe = selective && Has(m, "moe");
  c.recompute_moe_act = selective && Has(m, "moe_act");
  c.recompute_layernorm = selective && Has(m, "layernorm");
  c.recompute_mla_up = selective && Has(m, "mla_up_proj");
  c.recompute_shared = selective && Has(m, "shared_experts");
  c.shared_gate = m.moe_shared_expert_gate;
  // token_dispatcher.py MoEAlltoAllTokenDispatcher.dispatch_preprocess (Megatron-LM d98e8a64)
  // permutes the local tokens with moe_utils.permute: fused, TE's moe_permute_with_probs
  // keeps its row_id_map, int32 [tokens, 2 * experts + 1] (TE d0067d0d
  // pytorch/triton/permutation.py make_row_id_map, permutation.py
  // _moe_permute_mask_map_setup_context); unfused, index_select keeps the int64
  // sorted_indices, one per routed copy. Both are also the un-permute's mapping.
  if (m.moe_token_dispatcher_type == model::MoeTokenDispatcher::kAlltoall && c.experts > 0) {
    c.permute_map_per_token =
        m.moe_permute_fusion ? 4 * (2 * c.experts + 1) : 8 * static_cast<std::int64_t>(c.topk);
    // With several local experts the received tokens are sorted by expert after the
    // all-to-all and back before it (sort_chunks_by_idxs in dispatch_postprocess and
    // combine_preprocess): fused, TE's moe_sort_chunks_by_index keeps an int32 row map per
    // received token each time (make_chunk_sort_map, _moe_chunk_sort_setup_context); the
    // unfused torch.cat of the chunks keeps nothing.
    const std::int64_t local_experts = c.experts / std::max(1, m.expert_model_parallel_size);
    if (m.moe_permute_fusion && local_experts > 1)
      c.permute_map_rows_per_token = 2 * 4 * static_cast<std::int64_t>(c.topk) * c.etp;
  } else if (m.moe_token_dispatcher_type == model::MoeTokenDispatcher::kAllgather &&
             c.experts > 0) {
    // token_dispatcher.py MoEAllGatherTokenDispatcher (Megatron-LM d98e8a64): the routing
    // map, the probabilities and the tokens are all-gathered over the expert-TP x EP group
    // (`gathered` tokens per local one), then dispatch_postprocess permutes the gathered
    // tokens bound for the local experts: moe_utils.permute keeps, fused, TE moe_permute's
    // int32 row map [gathered, 2 * local experts + 1]; unfused, the int64 sorted indices, one
    // per local copy (topk x ETP per local token). Then `local_probs.T.contiguous()
    // .masked_select(local_map.T.contiguous())` keeps its fp32 input and bool mask,
    // [local experts, gathered] each (PyTorch derivatives.yaml masked_select: self, mask).
    const int ep = std::max(1, m.expert_model_parallel_size);
    const std::int64_t gathered = std::int64_t{c.etp} * ep;
    const std::int64_t local_experts = c.experts / ep;
    c.permute_map_per_token = (4 + 1) * local_experts * gathered;
    if (m.moe_permute_fusion) {
      c.permute_map_per_token += 4 * (2 * local_experts + 1) * gathered;
    } else {
      c.permute_map_rows_per_token = 8 * static_cast<std::int64_t>(c.topk) * c.etp;
    }
  }
  c.shared_overlap_gather = m.moe_shared_expert_overlap && m.sequence_parallel && c.tp > 1;
  c.shared_stream = m.moe_shared_expert_overlap && c.shared_ffn > 0;
  if (m.fine_grained_activation_offloading) {
    c.off_norm1 = Contains(m.offload_modules, "attn_norm");
    c.off_qkv = Contains(m.offload_modules, "qkv_linear");
    c.off_core_attn = Contains(m.offload_modules, "core_attn");
    c.off_proj = Contains(m.offload_modules, "attn_proj");
    c.off_norm2 = Contains(m.offload_modules, "mlp_norm");
    c.off_expert_fc1 = Contains(m.offload_modules, "expert_fc1");
    c.off_moe_act = Contains(m.offload_modules, "moe_act");
  }
  if (job.peft) {
    c.frozen_base = true;
    c.lora_dim = job.peft->dim;
    c.lora_expert_dim = ExpertLoraRank(*job.peft, m.moe_router_topk, c.etp, false);
    c.lora_expert_fc1_dim = ExpertLoraRank(*job.peft, m.moe_router_topk, c.etp, true);
    c.lora_qkv = Targets(*job.peft, "linear_qkv");
    c.lora_proj = Targets(*job.peft, "linear_proj");
    c.lora_fc1 = Targets(*job.peft, "linear_fc1");
    c.lora_fc2 = Targets(*job.peft, "linear_fc2");
    c.lora_regather = RegatherEligible(job);
    c.dora = job.peft->method == model::PeftMethod::kDora;
  }
  return c;
}

ActBytes LayerActivations(const ActContext& c, bool moe_layer, bool fp8_layer) {
  ActBytes a{};
  fp8_layer = fp8_layer && c.fp8;
  FillAttention(c, fp8_layer, a);
  if (moe_layer) {
    FillMoe(c, fp8_layer, a);
  } else {
    FillDenseMlp(c, fp8_layer, a);
  }
  FillLora(c, moe_layer, fp8_layer, a);
  // Bridge te_layers.py TERowParallelLinearLayerNorm: TE's norm keeps its input, the
  // row-parallel output (local shard under SP), after attention and after the MLP.
  if (c.post_norms) a[kPostNormInput] = 2 * c.act_bytes * c.h / c.hid_div;
  for (auto& bytes : a) bytes *= c.tokens;
  return a;
}

std::int64_t LayerBackwardWorkspace(const ActContext& c, bool moe_layer, bool fp8_layer) {
  return LayerBackwardWorkspace(c, moe_layer, fp8_layer, LayerActivations(c, moe_layer, fp8_layer));
}

std::int64_t LayerBackwardWorkspace(const ActContext& c, bool moe_layer, bool fp8_layer,
                                    const ActBytes& kept) {
  // The MLP backward's working set, tensor by tensor, lives in layer_tensors.cc (shared
  // with the trace synthesizer, src/synth/); it is all live at the MLP backward's peak.
  std::int64_t working = SumBytes(LayerBackwardTransients(c, moe_layer, fp8_layer));
  if (c.unfused_attn) {
    // Unfused attention's backward holds score-sized gradients, which can outgrow the
    // MLP's working set (the layer's saved tensors are still all counted, an upper bound).
    const AttnBwdBytes attn = LayerAttentionBackwardTransients(c, fp8_layer);
    working = std::max(working,
                       attn[kAttnBwdGradOut] + attn[kAttnBwdGradProbs] + attn[kAttnBwdGradScores]);
  }
  // Selective-recompute replay of this layer's checkpointed parts (none without selective
  // recompute: the layer then keeps what it would keep without it).
  const bool selective = c.recompute_core_attn || c.recompute_mlp || c.recompute_moe ||
                         c.recompute_moe_act || c.recompute_layernorm || c.recompute_mla_up ||
                         c.recompute_shared;
  if (!selective) return working;
  // Tensor by tensor, as the trace replays them: a re-created tensor is new memory even
  // where another tensor kept in its place is larger (a checkpoint's q, k, v) or holds the
  // forward's copy (LoRA-A's input to linear_proj).
  return working + SumBytes(LayerRecomputedTensors(c, moe_layer, fp8_layer, kept));
}

std::int64_t CheckpointInputBytes(const ActContext& c, bool distribute_saved) {
  std::int64_t per_token = c.act_bytes * c.h / c.hid_div;
  if (distribute_saved) per_token /= c.tp;
  return per_token * c.tokens;
}

// MCore pipeline_parallel/fine_grained_activation_offload.py with the offload contexts of
// transformer_layer.py, attention.py and moe/experts.py: each listed module's saved tensors
// (its inputs and what it keeps inside) move to the host. The norms are separate modules
// only where the layer spec has them: MCore's local spec (input norm) and MoE layers
// (pre-MLP TENorm); with TE's fused norm + linear they are IdentityOp, and their input is
// the fused linear's (qkv_linear). Tensors under min_offloaded_tensor_size (1M elements)
// and the last groups kept for the reload margin are not modelled.
ActBytes OffloadedTensors(const ActContext& c, bool moe_layer, const ActBytes& kept) {
  ActBytes off{};
  auto take = [&](ActTensor t) { off[t] = kept[t]; };
  if (c.off_norm1 && c.local_attn) take(kLn1Input);
  if (c.off_qkv) {
    take(kLn1Output);
    if (!c.local_attn) take(kLn1Input);  // TE LayerNormLinear keeps the norm input
  }
  if (c.off_core_attn) {
    take(kAttnQkv);
    take(kAttnSoftmaxStats);
    take(kAttnProbs);
    take(kAttnProbsDropout);
  }
  if (c.off_proj) take(kAttnOut);
  if (moe_layer) {
    if (c.off_norm2) take(kLn2Input);
    if (c.off_expert_fc1) take(kMoeDispatch);
    if (c.off_moe_act) {
      take(kMoeFc1Out);
      take(kMoeActParts);
    }
  }
  return off;
}

std::int64_t LocalAttentionScoreBuffer(const ActContext& c) {
  return c.local_attn ? c.act_bytes * c.heads_per_rank * c.seq_k * c.tokens : 0;
}

std::int64_t SumBytes(const ActBytes& bytes) {
  std::int64_t sum = 0;
  for (auto b : bytes) sum += b;
  return sum;
}

}  // namespace memtune::tensors
