// Transient tensors of one transformer layer (docs/estimator.md "Transients"). Sources:
// Megatron-LM d98e8a6 transformer_layer.py / attention.py / mlp.py / moe/token_dispatcher.py,
// TransformerEngine d0067d0 module/layernorm_linear.py and module/linear.py (the SP
// all-gather of the GEMM input, the reduce-scatter of row-parallel outputs, fp8 casts).
#include "tensors/layer_tensors.h"

namespace memtune::tensors {
namespace {

constexpr const char* kFwdNames[kNumFwdTransients] = {
    "fwd.ln1_gather",   "fwd.attn_score_input", "fwd.attn_scores", "fwd.proj_in_cast",
    "fwd.proj_out",     "fwd.proj_scatter",     "fwd.ln2_gather",  "fwd.act_out",
    "fwd.moe_dispatch", "fwd.moe_combine",      "fwd.fc2_out",     "fwd.fc2_scatter",
};

constexpr const char* kBwdNames[kNumBwdTransients] = {
    "bwd.grad_out",         "bwd.grad_gather",   "bwd.grad_fc2_in", "bwd.grad_fc1_out",
    "bwd.grad_fc1_out_fp8", "bwd.fc1_in_gather", "bwd.fc1_wgrad",   "bwd.fc1_dgrad",
};

}  // namespace

const char* FwdTransientName(FwdTransient tensor) { return kFwdNames[tensor]; }
const char* BwdTransientName(BwdTransient tensor) { return kBwdNames[tensor]; }

FwdBytes LayerForwardTransients(const ActContext& c, bool moe_layer, bool fp8_layer) {
  fp8_layer = fp8_layer && c.fp8;
  const std::int64_t act = c.act_bytes, gemm_in = fp8_layer ? 1 : c.act_bytes;
  const bool sp = c.hid_div > 1;
  const std::int64_t local = act * c.h / c.hid_div;
  FwdBytes f{};
  // layernorm_linear.py: with SP the (fp8) norm output is all-gathered into a full-sequence
  // buffer for the GEMM and freed after it.
  f[kFwdLn1Gather] = sp ? gemm_in * c.h : 0;
  // backends.py UnfusedDotProductAttention: baddbmm(torch.empty(scores), q, k^T, beta=0)
  // returns a new scores tensor; MCore's DotProductAttention passes its persistent global
  // buffer instead of the empty one. The scores are freed once the softmax has run.
  if (c.unfused_attn && !c.recompute_core_attn) {
    const std::int64_t scores = act * c.heads_per_rank * c.seq_k;
    f[kFwdAttnScoreInput] = c.local_attn ? 0 : scores;
    f[kFwdAttnScores] = scores;
  }
  // attention.py set_save_original_input(linear_proj): current scaling casts the bf16 output
  // for the GEMM only (delayed scaling saves the cast, counted in act.attn_out).
  const std::int64_t out_width = c.mla ? c.heads_per_rank * c.mla_v_width : c.q_width / c.tp;
  f[kFwdProjInCast] = (fp8_layer && !c.fp8_delayed) ? out_width : 0;
  // Row-parallel linear: the GEMM writes full-token partial sums, reduce-scattered (SP) or
  // all-reduced in place (no SP); the residual add then makes the saved pre-MLP input.
  f[kFwdProjOut] = act * c.h;
  f[kFwdProjScatter] = sp ? local : 0;
  if (moe_layer) {
    const std::int64_t copies = c.topk * c.etp * c.rows_mult;
    const std::int64_t fe = c.moe_ffn / c.etp;
    // token_dispatcher.py: permuted tokens arrive in a bf16 buffer before the expert GEMM
    // input is cast; the combine all-to-all returns the expert outputs.
    f[kFwdMoeDispatch] = act * c.h * copies / c.hid_div;
    f[kFwdActOut] = fp8_layer ? act * fe * copies / c.hid_div : 0;
    f[kFwdMoeCombine] = act * c.h * copies / c.hid_div;
    f[kFwdFc2Scatter] = local;  // un-permuted, probability-weighted output
  } else {
    f[kFwdLn2Gather] = sp ? gemm_in * c.h : 0;
    // fused_bias_swiglu.py output in bf16; TE linear_fc2 casts it to fp8 (the saved copy).
    f[kFwdActOut] = fp8_layer ? act * c.ffn / c.tp : 0;
    f[kFwdFc2Out] = act * c.h;
    f[kFwdFc2Scatter] = sp ? local : 0;
  }
  for (auto& bytes : f) bytes *= c.tokens;
  return f;
}

namespace {

// Per token: the norm output a column-parallel linear's weight gradient gathers in backward
// (TE layernorm_linear.py: ln_out_needs_gather only when the weight requires grad). A
// frozen PEFT base computes no weight gradient; its LoRA-A does, from the gathered input
// it kept, or, with sequence-parallel re-gather, from a new bf16 all-gather of the local
// shard (MCore's SP linear backward).
std::int64_t WgradInputGather(const ActContext& c, bool lora_target, std::int64_t gemm_in) {
  if (!c.frozen_base) return gemm_in * c.h;
  return lora_target && c.lora_regather && c.hid_div > 1 ? c.act_bytes * c.h : 0;
}

}  // namespace

BwdBytes LayerBackwardTransients(const ActContext& c, bool moe_layer, bool fp8_layer) {
  fp8_layer = fp8_layer && c.fp8;
  const std::int64_t act = c.act_bytes, gemm_in = fp8_layer ? 1 : c.act_bytes;
  BwdBytes b{};
  if (moe_layer) {
    // The experts' backward runs on the expert rows this rank computes (tokens / SP x top-k
    // x ETP, rows_mult): the combine's backward brings the output gradient's rows
    // (token_dispatcher.py combine_preprocess / token_combine run backward: all-to-all,
    // and the expert-TP reduce-scatter's all-gather), then the fc2 dgrad, the activation
    // backward, the fc1 dgrad on [rows, h]; the experts' wgrads read the dispatched tokens
    // they kept (no gather).
    const std::int64_t rows = c.tokens / c.hid_div * c.topk * c.etp * c.rows_mult;
    const std::int64_t fe = c.moe_ffn / c.etp;
    b[kBwdGradOut] = act * c.h / c.hid_div * c.tokens;
    b[kBwdGradGather] = act * c.h * rows;
    b[kBwdGradFc2In] = act * fe * rows;
    b[kBwdGradFc1Out] = act * c.glu_factor * fe * rows;
    b[kBwdGradFc1OutFp8] = fp8_layer ? c.glu_factor * fe * rows : 0;
    b[kBwdFc1Dgrad] = act * c.h * rows;
    b[kBwdFc1Wgrad] = c.fc1_wgrad_moe;
    return b;
  }
  const std::int64_t width = c.ffn / c.tp;
  // MLP backward of one layer: incoming grad (local), SP-gathered grad for the fc2 dgrad,
  // grad of the fc2 input, grad of the fc1 output (+ its fp8 copy), the SP-gathered fc1
  // wgrad input and the fc1 dgrad output before its reduce-scatter.
  b[kBwdGradOut] = act * c.h / c.hid_div;
  b[kBwdGradGather] = act * c.h;
  b[kBwdGradFc2In] = act * width;
  b[kBwdGradFc1Out] = act * c.glu_factor * width;
  b[kBwdGradFc1OutFp8] = fp8_layer ? c.glu_factor * width : 0;
  b[kBwdFc1InGather] = WgradInputGather(c, c.lora_fc1, gemm_in);
  b[kBwdFc1Dgrad] = act * c.h;
  for (auto& bytes : b) bytes *= c.tokens;
  b[kBwdFc1Wgrad] = c.fc1_wgrad_dense;  // (per weight, not token)
  return b;
}

const char* AttnBwdTransientName(AttnBwdTransient tensor) {
  constexpr const char* kNames[kNumAttnBwdTransients] = {
      "bwd.grad_attn_out", "bwd.grad_attn_probs", "bwd.grad_attn_scores",
      "bwd.grad_qkv",      "bwd.ln1_gather",      "bwd.qkv_dgrad"};
  return kNames[tensor];
}

AttnBwdBytes LayerAttentionBackwardTransients(const ActContext& c, bool fp8_layer) {
  fp8_layer = fp8_layer && c.fp8;
  const std::int64_t act = c.act_bytes, gemm_in = fp8_layer ? 1 : c.act_bytes;
  const std::int64_t q = c.mla ? c.heads_per_rank * c.mla_v_width : c.q_width / c.tp;
  const std::int64_t qkv = c.mla ? c.heads_per_rank * (2 * c.mla_qk_width + c.mla_v_width)
                                 : c.q_width / c.tp + 2 * c.kv_width_per_rank;
  AttnBwdBytes b{};
  b[kAttnBwdGradOut] = act * q;
  if (c.unfused_attn) {
    // bmm backward writes the probabilities' gradient; the dropout backward and the torch
    // softmax's fp32 backward each write a new one (the fused softmax kernel works in place).
    const std::int64_t scores = c.heads_per_rank * c.seq_k;
    b[kAttnBwdGradProbs] = act * scores;
    const bool dropout = c.probs_dropout_bytes > 0;
    const bool fp32_softmax = c.probs_bytes > act;
    b[kAttnBwdGradScores] = ((dropout ? act : 0) + (fp32_softmax ? 4 : 0)) * scores;
  }
  b[kAttnBwdGradQkv] = act * qkv;  // attention.py / TE fused attn backward: one dqkv buffer
  b[kAttnBwdLn1Gather] = WgradInputGather(c, c.lora_qkv, gemm_in);
  b[kAttnBwdQkvDgrad] = act * c.h;
  for (auto& bytes : b) bytes *= c.tokens;
  return b;
}

std::int64_t SumBytes(const FwdBytes& bytes) {
  std::int64_t sum = 0;
  for (auto b : bytes) sum += b;
  return sum;
}

std::int64_t SumBytes(const BwdBytes& bytes) {
  std::int64_t sum = 0;
  for (auto b : bytes) sum += b;
  return sum;
}

ActBytes LayerRecomputedTensors(const ActContext& c, bool moe_layer, bool fp8_layer) {
  return LayerRecomputedTensors(c, moe_layer, fp8_layer, LayerActivations(c, moe_layer, fp8_layer));
}

ActBytes LayerRecomputedTensors(const ActContext& c, bool moe_layer, bool fp8_layer,
                                const ActBytes& kept) {
  ActContext plain = c;
  plain.recompute_core_attn = plain.recompute_mlp = plain.recompute_moe = false;
  plain.recompute_moe_act = plain.recompute_layernorm = plain.recompute_mla_up = false;
  plain.recompute_shared = false;
  const ActBytes full = LayerActivations(plain, moe_layer, fp8_layer);
  ActBytes dropped{};
  for (int t = 0; t < kNumActTensors; ++t) dropped[t] = full[t] > kept[t] ? full[t] - kept[t] : 0;
  return dropped;
}

}  // namespace memtune::tensors
