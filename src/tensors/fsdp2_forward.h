// One torchtitan block's forward, op by op (memtune_tensors internal API). Written once
// and run two ways, like fsdp2_backward.h: the trace generator emits it
// (src/synth/fsdp2_block.cc) and WalkBlockForward walks it for the forward's peak, which the
// estimator uses for the moments inside a forward (src/estimate/fsdp2_pipeline.cc). The op
// order is torchtitan 9dec370 models/llama/model.py (RMSNorm on x.float(), wq/wk/wv,
// complex RoPE on fp32 copies, repeat_kv, flash SDPA, wo, residual, RMSNorm,
// w2(silu(w1 x) * w3 x), residual); with qk_layernorm, Qwen3's q/k norms and real-valued
// RoPE (torchtitan d880de214 models/qwen3/model/model.py). Under TP (sequence parallel) the
// norm outputs are all-gathered before the column-parallel GEMMs and the row-parallel
// outputs reduce-scattered. torch.compile fuses the norm, RoPE and SiLU*mul. Which tensors
// survive is the AC mode's choice.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "tensors/fsdp2_tensors.h"

namespace memtune::tensors {

// `Exec` provides: int Alloc(std::int64_t bytes, const char* name) (a new tensor, its id);
// void Free(int id) (ids < 0 are no-ops); void Keep(const char* name, int id) (a tensor the
// block keeps for backward, reported once the forward is done). The block input is live
// before and stays the caller's. `checkpointed`: the block runs under its checkpoint (what
// the AC mode keeps; Fsdp2Facts::Checkpointed). `recompute`: the checkpoint's re-run in
// backward (stops after the last saved tensor; the policy's cached outputs are not
// re-made). Returns the block output's id (-1 when recomputing).
template <class Exec>
int Fsdp2BlockForward(const Fsdp2Facts& f, bool checkpointed, bool recompute, Exec& x) {
  const bool sac = f.ac == Fsdp2Ac::kSelectiveOp;
  // kEager: the tensors autograd saves (no checkpoint, or a recompute re-creating them);
  // kSac: the policy's MUST_SAVE outputs; kNothing: a fully checkpointed block.
  enum class Keep { kEager, kSac, kNothing };
  const Keep mode = recompute || !checkpointed ? Keep::kEager : sac ? Keep::kSac : Keep::kNothing;
  struct Entry {
    const char* name;
    int h;
    bool keep;
  };
  std::vector<Entry> live;
  auto make = [&](const char* name, std::int64_t bytes, bool eager, bool must_save = false) -> int {
    if (recompute && sac && must_save) return -1;  // cached by the policy in forward
    const bool keep = mode == Keep::kEager ? eager : mode == Keep::kSac ? must_save : false;
    const int h = x.Alloc(bytes, name);
    if (bytes > 0) live.push_back({name, h, keep});
    return bytes > 0 ? h : -1;
  };
  auto release = [&](int h) {  // last use: freed unless autograd / the policy saves it
    auto it = std::find_if(live.begin(), live.end(), [h](const Entry& e) { return e.h == h; });
    if (h < 0 || it == live.end() || it->keep) return;
    x.Free(it->h);
    live.erase(it);
  };
  const std::int64_t n = f.tokens, r = f.tokens / f.tp, h = f.hidden, q = f.q_local,
                     kv = f.kv_local;
  const std::int64_t ffn = f.ffn_local, kvs = f.repeat_kv ? q : kv;
  const bool tp = f.tp > 1, fused = f.compile;
  auto norm = [&](const char* xf_name, const char* normed_name, const char* gemm_name) -> int {
    if (!fused) {
      make(xf_name, 4 * r * h, true);  // pow saves x.float()
      int sq = make("fwd.norm_pow", 4 * r * h, false);
      int scaled = make("fwd.norm_scaled", 4 * r * h, false);
      release(sq);
      make(normed_name, 2 * r * h, true);  // `* weight` saves it
      release(scaled);
    }
    int y = make(tp ? "fwd.norm_out" : gemm_name, 2 * r * h, !tp);
    if (!tp) return y;
    int gathered = make(gemm_name, 2 * n * h, true);  // Shard(1) -> Replicate
    release(y);
    return gathered;
  };
  norm("norm1.x_fp32", "norm1.normed", "attn.gemm_input");
  int xq = make("sac.wq_out", 2 * n * q, false, true);
  int xk = make("fwd.wk_out", 2 * n * kv, false);
  int xv = make(f.repeat_kv ? "sac.wv_out" : "sdpa.v", 2 * n * kv, !f.repeat_kv, true);
  const char* k_rotated = f.repeat_kv ? "fwd.k_rot" : "sdpa.k";
  int kr;
  if (f.qk_norm) {
    // Qwen3 (torchtitan d880de214 models/qwen3/model/model.py): q_norm and k_norm, PyTorch's
    // composite rms_norm over head_dim (input.to(fp32), pow, mean, rsqrt, mul, type_as,
    // `* weight`), then RoPE on the bf16 norm outputs.
    auto head_norm = [&](const char* const names[3], std::int64_t w) -> int {
      const std::int64_t heads = w / f.head_dim;
      make(names[0], 4 * n * w, true);  // saved by pow and mul
      int sq = make("fwd.norm_pow", 4 * n * w, false);
      int mean = make("fwd.norm_mean", 4 * n * heads, false);
      release(sq);
      make(names[1], 4 * n * heads, true);  // rsqrt: saved by rsqrt and mul
      release(mean);
      int scaled = make("fwd.norm_scaled", 4 * n * w, false);
      make(names[2], 2 * n * w, true);  // type_as: saved by `* weight`
      release(scaled);
      return make("fwd.qk_norm_out", 2 * n * w, false);
    };
    // (x * cos) + (rotate_half(x) * sin); rotate_half = cat(-x2, x1) on the halves.
    auto rope = [&](int in, std::int64_t w, const char* out_name, bool keep) -> int {
      int by_cos = make("fwd.rope_cos_mul", 2 * n * w, false);
      int neg = make("fwd.rope_neg", n * w, false);
      int rotated = make("fwd.rope_rotate_half", 2 * n * w, false);
      release(neg);
      int by_sin = make("fwd.rope_sin_mul", 2 * n * w, false);
      release(rotated);
      int out = make(out_name, 2 * n * w, keep);
      release(by_cos);
      release(by_sin);
      release(in);
      return out;
    };
    static const char* const kQ[3] = {"qnorm.x_fp32", "qnorm.rstd", "qnorm.normed"};
    static const char* const kK[3] = {"knorm.x_fp32", "knorm.rstd", "knorm.normed"};
    int qn = head_norm(kQ, q);
    release(xq);
    int kn = head_norm(kK, kv);
    release(xk);
    // cos / sin: bf16 copies of rope_cache[:seq], saved by the multiplies.
    make("rope.cos", 2 * f.seq_length * f.head_dim, true);
    make("rope.sin", 2 * f.seq_length * f.head_dim, true);
    rope(qn, q, "sdpa.q", true);
    kr = rope(kn, kv, k_rotated, !f.repeat_kv);
  } else if (!fused) {
    make("rope.q_fp32", 4 * n * q, true);
    int pq = make("fwd.rope_q", 4 * n * q, false);
    make("sdpa.q", 2 * n * q, true);
    release(pq);
    release(xq);
    make("rope.k_fp32", 4 * n * kv, true);
    int pk = make("fwd.rope_k", 4 * n * kv, false);
    kr = make(k_rotated, 2 * n * kv, !f.repeat_kv);
    release(pk);
    release(xk);
  } else {
    make("sdpa.q", 2 * n * q, true);
    release(xq);
    kr = make(k_rotated, 2 * n * kv, !f.repeat_kv);
    release(xk);
  }
  if (f.repeat_kv) {  // expand + reshape materialises n_heads copies
    make("sdpa.k", 2 * n * kvs, true);
    release(kr);
    make("sdpa.v", 2 * n * kvs, true);
    release(xv);
  }
  std::vector<int> ring;
  if (f.cp > 1 && !(recompute && sac)) {
    // Context parallel SDPA (torch distributed/tensor/experimental/_attention.py
    // _templated_ring_attention, torchtitan's default "allgather" rotate method): k and v
    // made contiguous, concatenated, all-gathered over CP once; the merger keeps the output
    // in fp32 (convert_to_f32).
    for (auto [name, bytes] :
         {std::pair{"fwd.ring_k", 2 * n * kvs}, std::pair{"fwd.ring_v", 2 * n * kvs},
          std::pair{"fwd.ring_kv_cat", 4 * n * kvs},
          std::pair{"fwd.ring_kv_all_gather", 4 * n * kvs * f.cp},
          std::pair{"fwd.ring_out_fp32", 4 * n * q}}) {
      ring.push_back(make(name, bytes, false));
    }
  }
  make("sdpa.out", 2 * n * q, true, true);
  make("sdpa.lse", 4 * n * f.heads_local, true, true);
  for (int t : ring) release(t);
  int wo = make("fwd.wo_out", 2 * n * h, false);
  if (tp) {
    int scattered = make("fwd.wo_reduce_scatter", 2 * r * h, false);
    release(wo);
    wo = scattered;
  }
  int mid = make("residual.mid", 2 * r * h, fused);  // h = x + attention(...)
  release(wo);
  norm("norm2.x_fp32", "norm2.normed", "mlp.gemm_input");
  make("mlp.w1_out", 2 * n * ffn, true, true);
  if (!fused) make("mlp.silu_out", 2 * n * ffn, true);
  make("mlp.w3_out", 2 * n * ffn, true);
  make("mlp.w2_in", 2 * n * ffn, true);
  int out = -1;
  if (!recompute) {  // non-reentrant checkpoint stops recomputing after the last saved tensor
    // Compiled, the partitioner does not save w2's output (backward never reads it).
    int w2 = make("sac.w2_out", 2 * n * h, false, /*must_save=*/!fused);
    if (tp) {
      int scattered = make("fwd.w2_reduce_scatter", 2 * r * h, false);
      release(w2);
      w2 = scattered;
    }
    out = x.Alloc(2 * r * h, "act.block_input");  // out = h + feed_forward(...)
    release(w2);
  }
  release(mid);
  for (auto& e : live) {
    if (e.keep) {
      x.Keep(e.name, e.h);
    } else {
      x.Free(e.h);
    }
  }
  return out;
}

// A block's forward in bytes: the most its tensors hold at once (kept and temporary), and
// what it keeps and returns at the end.
struct Fsdp2ForwardPeak {
  std::int64_t peak_bytes = 0;
  std::int64_t kept_bytes = 0;
  std::int64_t output_bytes = 0;
};
// `checkpointed`: the block runs under its checkpoint (Fsdp2Facts::Checkpointed).
Fsdp2ForwardPeak WalkBlockForward(const Fsdp2Facts& f, bool checkpointed);

}  // namespace memtune::tensors
