// One torchtitan block's backward, op by op (memtune_tensors internal API). Written once
// and run two ways: WalkBlockBackward (below) walks it for the block's peak, which the
// estimator uses (src/estimate/fsdp2_estimate.cc); the trace generator emits it
// (src/synth/fsdp2_block.cc). Order and sizes follow autograd on torchtitan 9dec370's block:
// w2 dgrad, SiLU * mul backward, w3 / w1 dgrads summed, RMSNorm backward in fp32, residual,
// wo dgrad, flash backward (fp32 dq accumulator; ring attention's buffers under CP),
// repeat_kv and RoPE backward, wq / wk / wv dgrads summed, RMSNorm backward. Under TP the
// row-parallel outputs' gradients are all-gathered and the input gradients reduce-scattered.
#pragma once

#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "tensors/fsdp2_tensors.h"

namespace memtune::tensors {

// Indices into Fsdp2Facts::block_params (fsdp2_tensors.cc AddParams order; the q/k norm
// weights only with qk_layernorm).
enum Fsdp2BlockParam { kAttnNorm, kWq, kWk, kWv, kWo, kFfnNorm, kW1, kW2, kW3, kQNorm, kKNorm };

// RMSNorm backward over `rh` elements (models/norms.py, or PyTorch's composite rms_norm,
// eager): MulBackward (weight) in bf16, ToCopyBackward to fp32, the x * rsqrt and pow/mean
// branches in fp32, summed, and the x.float() backward to bf16; fused (compile): one
// kernel. Returns the input gradient's id.
template <class Exec>
int Fsdp2NormBackwardOf(std::int64_t rh, bool fused, Exec& x) {
  if (fused) return x.Alloc(2 * rh, "bwd.norm_dgrad");
  const int weighted = x.Alloc(2 * rh, "bwd.norm_weighted");
  const int up = x.Alloc(4 * rh, "bwd.norm_fp32");
  x.Free(weighted);
  const int direct = x.Alloc(4 * rh, "bwd.norm_direct");
  const int branch = x.Alloc(4 * rh, "bwd.norm_rsqrt_branch");
  const int sum = x.Alloc(4 * rh, "bwd.norm_sum");
  x.Free(up);
  x.Free(direct);
  x.Free(branch);
  const int down = x.Alloc(2 * rh, "bwd.norm_dgrad");
  x.Free(sum);
  return down;
}

// A block norm's backward (rows of the sequence-sharded residual times hidden).
template <class Exec>
int Fsdp2NormBackward(const Fsdp2Facts& f, bool fused, Exec& x) {
  return Fsdp2NormBackwardOf(f.tokens / f.tp * f.hidden, fused, x);
}

// Qwen3's RoPE and q/k-norm backward for q or k (`width` local columns), on the gradient
// `*grad` of the rotated tensor (torchtitan d880de214 models/qwen3/model/model.py
// apply_rotary_emb, Attention.forward): the add passes the gradient to both multiplies,
// grad * cos and grad * sin; rotate_half's cat backward is two views, the neg backward
// writes half the width and each slice backward a zero-filled full-width tensor, summed in
// place into the grad * cos result (autograd's InputBuffer accumulates in place). Then the
// norm's backward (nn.RMSNorm over head_dim) and its weight gradient. Replaces `*grad` by the
// gradient of the wq / wk output.
template <class Exec>
void Fsdp2QkNormRopeBackward(const Fsdp2Facts& f, int* grad, std::int64_t width,
                             Fsdp2BlockParam weight, const char* const saved[3], Exec& x) {
  const std::int64_t nw = f.tokens * width;
  const int via_cos = x.Alloc(2 * nw, "bwd.rope_cos_grad");
  const int via_sin = x.Alloc(2 * nw, "bwd.rope_sin_grad");
  x.Free(*grad);
  const int neg = x.Alloc(nw, "bwd.rope_neg_grad");
  const int second = x.Alloc(2 * nw, "bwd.rope_slice_grad");
  x.Free(neg);
  const int first = x.Alloc(2 * nw, "bwd.rope_slice_grad");
  x.Free(via_sin);
  x.Free(second);
  x.Free(first);
  const int dx = Fsdp2NormBackwardOf(nw, /*fused=*/false, x);
  x.WeightGrad(f.param_bytes * f.block_params[weight].Elements());
  for (int i = 0; i < 3; ++i) x.Take(saved[i]);
  x.Free(via_cos);
  *grad = dx;
}

// `Exec` provides: int Alloc(std::int64_t bytes, const char* name) (a new temporary, its id);
// void Free(int id) (ids < 0 are no-ops); void Take(const char* name) (a saved tensor's
// last use); void WeightGrad(std::int64_t bytes) (an unsharded weight gradient, kept until
// the reduce-scatter). `grad_out` is the incoming gradient's id; returns the input
// gradient's id. Saved tensors not taken are released by the caller afterwards.
template <class Exec>
int Fsdp2BlockBackward(const Fsdp2Facts& f, int grad_out, Exec& x) {
  const std::int64_t n = f.tokens, r = f.tokens / f.tp, h = f.hidden, q = f.q_local,
                     kv = f.kv_local;
  const std::int64_t ffn = f.ffn_local, kvs = f.repeat_kv ? q : kv;
  const bool tp = f.tp > 1, fused = f.compile;
  auto wgrad = [&](Fsdp2BlockParam p) {
    x.WeightGrad(f.param_bytes * f.block_params[p].Elements());
  };
  auto gather = [&]() { return tp ? x.Alloc(2 * n * h, "bwd.grad_all_gather") : -1; };
  auto scatter = [&](int& full) {
    if (!tp) return;
    const int local = x.Alloc(2 * r * h, "bwd.grad_reduce_scatter");
    x.Free(full);
    full = local;
  };
  // Feed-forward.
  int g = gather();
  const int dp = x.Alloc(2 * n * ffn, "bwd.w2_dgrad");
  wgrad(kW2);
  x.Take("mlp.w2_in");
  x.Free(g);
  const int ds = fused ? -1 : x.Alloc(2 * n * ffn, "bwd.silu_out_grad");
  const int db = x.Alloc(2 * n * ffn, "bwd.w3_out_grad");
  int da = fused ? x.Alloc(2 * n * ffn, "bwd.w1_out_grad") : -1;
  x.Free(dp);
  x.Take("mlp.silu_out");
  x.Take("mlp.w3_out");
  if (!fused) {
    da = x.Alloc(2 * n * ffn, "bwd.w1_out_grad");
    x.Free(ds);
  }
  x.Take("mlp.w1_out");
  const int dx3 = x.Alloc(2 * n * h, "bwd.w3_dgrad");
  wgrad(kW3);
  x.Free(db);
  const int dx1 = x.Alloc(2 * n * h, "bwd.w1_dgrad");
  wgrad(kW1);
  x.Free(da);
  int dmlp = x.Alloc(2 * n * h, "bwd.mlp_dgrad");
  x.Free(dx1);
  x.Free(dx3);
  x.Take("mlp.gemm_input");
  scatter(dmlp);
  const int dn2 = Fsdp2NormBackward(f, fused, x);
  wgrad(kFfnNorm);
  for (const char* t : {"norm2.x_fp32", "norm2.normed", "residual.mid"}) x.Take(t);
  x.Free(dmlp);
  const int dh = x.Alloc(2 * r * h, "bwd.residual_grad");
  x.Free(dn2);
  x.Free(grad_out);
  // Attention.
  g = gather();
  const int dout = x.Alloc(2 * n * q, "bwd.wo_dgrad");
  wgrad(kWo);
  x.Free(g);
  int ring[7] = {-1, -1, -1, -1, -1, -1, -1};
  if (f.cp > 1) {
    // _templated_ring_attention_backward: fp32 accumulators for dq/dk/dv, k and v made
    // contiguous, concatenated and all-gathered again, dk/dv exchanged by all-to-all in fp32.
    const std::pair<const char*, std::int64_t> buffers[7] = {
        {"bwd.ring_dq_fp32", 4 * n * q},
        {"bwd.ring_dkv_fp32", 8 * n * kvs},
        {"bwd.ring_kv", 4 * n * kvs},
        {"bwd.ring_kv_cat", 4 * n * kvs},
        {"bwd.ring_kv_all_gather", 4 * n * kvs * f.cp},
        {"bwd.ring_dkv_send", 8 * n * kvs},
        {"bwd.ring_dkv_recv", 8 * n * kvs}};
    for (int i = 0; i < 7; ++i) ring[i] = x.Alloc(buffers[i].second, buffers[i].first);
  }
  const int acc = x.Alloc(4 * n * q, "bwd.flash_dq_accum");
  int dq = x.Alloc(2 * n * q, "bwd.flash_dq");
  int dk = x.Alloc(2 * n * kvs, "bwd.flash_dk");
  int dv = x.Alloc(2 * n * kvs, "bwd.flash_dv");
  x.Free(acc);
  x.Free(dout);
  for (int id : ring) x.Free(id);
  for (const char* t : {"sdpa.q", "sdpa.k", "sdpa.v", "sdpa.out", "sdpa.lse"}) x.Take(t);
  if (f.repeat_kv) {  // the expand's backward sums the repeated heads
    const int k = x.Alloc(2 * n * kv, "bwd.repeat_kv_k");
    x.Free(dk);
    dk = k;
    const int v = x.Alloc(2 * n * kv, "bwd.repeat_kv_v");
    x.Free(dv);
    dv = v;
  }
  if (f.qk_norm) {  // Qwen3: RoPE, then q_norm / k_norm (CheckModelled: never compiled)
    static const char* const kQ[3] = {"qnorm.x_fp32", "qnorm.rstd", "qnorm.normed"};
    static const char* const kK[3] = {"knorm.x_fp32", "knorm.rstd", "knorm.normed"};
    Fsdp2QkNormRopeBackward(f, &dq, q, kQNorm, kQ, x);
    Fsdp2QkNormRopeBackward(f, &dk, kv, kKNorm, kK, x);
    x.Take("rope.cos");
    x.Take("rope.sin");
  } else if (!fused) {
    for (auto [grad, width, name] :
         {std::tuple{&dq, q, "rope.q_fp32"}, std::tuple{&dk, kv, "rope.k_fp32"}}) {
      const int up = x.Alloc(4 * n * width, "bwd.rope_fp32");
      const int down = x.Alloc(2 * n * width, "bwd.rope_dgrad");
      x.Free(up);
      x.Free(*grad);
      *grad = down;
      x.Take(name);
    }
  }
  // wq/wk/wv dgrads, summed as they come (autograd accumulates the input gradient).
  int total = -1;
  for (auto [grad, param, name] :
       {std::tuple{&dq, kWq, "bwd.wq_dgrad"}, std::tuple{&dk, kWk, "bwd.wk_dgrad"},
        std::tuple{&dv, kWv, "bwd.wv_dgrad"}}) {
    const int dx = x.Alloc(2 * n * h, name);
    wgrad(param);
    x.Free(*grad);
    if (total < 0) {
      total = dx;
      continue;
    }
    const int sum = x.Alloc(2 * n * h, "bwd.qkv_dgrad");
    x.Free(total);
    x.Free(dx);
    total = sum;
  }
  x.Take("attn.gemm_input");
  scatter(total);
  const int dn1 = Fsdp2NormBackward(f, fused, x);
  wgrad(kAttnNorm);
  x.Take("norm1.x_fp32");
  x.Take("norm1.normed");
  x.Free(total);
  const int dx = x.Alloc(2 * r * h, "bwd.block_dgrad");
  x.Free(dn1);
  x.Free(dh);
  return dx;
}

}  // namespace memtune::tensors

namespace memtune::tensors {

// The highest point of one block's backward (Fsdp2BlockBackward walked in bytes): the saved
// tensors still live then, and the temporaries (incoming gradient, working gradients and
// the unsharded weight gradients made so far).
struct Fsdp2BackwardPeak {
  std::int64_t saved_bytes = 0;
  std::int64_t temp_bytes = 0;
  std::int64_t Total() const { return saved_bytes + temp_bytes; }
  // What the backward leaves: the unsharded weight gradients in allocation order and the
  // input gradient (everything saved and every other temporary is freed by then).
  std::vector<std::int64_t> weight_grad_bytes;
  std::int64_t input_grad_bytes = 0;
};

// `checkpointed`: the block re-created its uncheckpointed set (and keeps its input);
// otherwise it holds what its forward kept without checkpointing.
Fsdp2BackwardPeak WalkBlockBackward(const Fsdp2Facts& f, bool checkpointed);

}  // namespace memtune::tensors
