// One torchtitan transformer block's forward and backward allocations (docs/synth.md
// "FSDP2"), op by op as torchtitan 9dec370 models/llama/model.py runs them: RMSNorm on
// x.float(), wq/wk/wv, complex RoPE on fp32 copies, repeat_kv, flash SDPA, wo, residual,
// RMSNorm, w2(silu(w1 x) * w3 x), residual; with qk_layernorm, Qwen3's q/k norms and
// real-valued RoPE (torchtitan d880de214 models/qwen3/model/model.py). Under TP (sequence parallel)
// the norm outputs are all-gathered before the column-parallel GEMMs and the row-parallel outputs
// reduce-scattered. torch.compile fuses the norm, RoPE and SiLU*mul (no fp32 or pointwise
// intermediates). Which tensors survive the forward is the AC mode's choice.
#include <algorithm>
#include <string_view>
#include <tuple>
#include <utility>

#include "synth/fsdp2_generator.h"
#include "tensors/fsdp2_backward.h"

namespace memtune::synth {

using tensors::Fsdp2Ac;

alloc::HandleId Fsdp2Generator::BlockForward(int layer, bool recompute, std::vector<Named>& kept) {
  const bool sac = f_.ac == Fsdp2Ac::kSelectiveOp;
  // kEager: the tensors autograd saves (no checkpoint, or a recompute re-creating them);
  // kSac: the policy's MUST_SAVE outputs; kNothing: a fully checkpointed block.
  enum class Keep { kEager, kSac, kNothing };
  const Keep mode = recompute || !f_.Checkpointed(layer) ? Keep::kEager
                    : sac                                ? Keep::kSac
                                                         : Keep::kNothing;
  struct Entry {
    const char* name;
    HandleId h;
    bool keep;
  };
  std::vector<Entry> live;
  auto make = [&](const char* name, std::int64_t bytes, bool eager,
                  bool must_save = false) -> HandleId {
    if (recompute && sac && must_save) return kNone;  // cached by the policy in forward
    const bool keep = mode == Keep::kEager ? eager : mode == Keep::kSac ? must_save : false;
    HandleId h = Alloc(bytes, name);
    if (h != kNone) live.push_back({name, h, keep});
    return h;
  };
  auto release = [&](HandleId h) {  // last use: freed unless autograd / the policy saves it
    auto it = std::find_if(live.begin(), live.end(), [h](const Entry& e) { return e.h == h; });
    if (h == kNone || it == live.end() || it->keep) return;
    Free(it->h);
    live.erase(it);
  };
  const std::int64_t n = f_.tokens, r = f_.tokens / f_.tp, h = f_.hidden, q = f_.q_local,
                     kv = f_.kv_local;
  const std::int64_t ffn = f_.ffn_local, kvs = f_.repeat_kv ? q : kv;
  const bool tp = f_.tp > 1, fused = f_.compile;
  auto norm = [&](const char* xf_name, const char* normed_name, const char* gemm_name) -> HandleId {
    if (!fused) {
      make(xf_name, 4 * r * h, true);  // pow saves x.float()
      HandleId sq = make("fwd.norm_pow", 4 * r * h, false);
      HandleId scaled = make("fwd.norm_scaled", 4 * r * h, false);
      release(sq);
      make(normed_name, 2 * r * h, true);  // `* weight` saves it
      release(scaled);
    }
    HandleId y = make(tp ? "fwd.norm_out" : gemm_name, 2 * r * h, !tp);
    if (!tp) return y;
    HandleId gathered = make(gemm_name, 2 * n * h, true);  // Shard(1) -> Replicate
    release(y);
    return gathered;
  };
  norm("norm1.x_fp32", "norm1.normed", "attn.gemm_input");
  HandleId xq = make("sac.wq_out", 2 * n * q, false, true);
  HandleId xk = make("fwd.wk_out", 2 * n * kv, false);
  HandleId xv = make(f_.repeat_kv ? "sac.wv_out" : "sdpa.v", 2 * n * kv, !f_.repeat_kv, true);
  const char* k_rotated = f_.repeat_kv ? "fwd.k_rot" : "sdpa.k";
  HandleId kr;
  if (f_.qk_norm) {
    // Qwen3 (torchtitan d880de214 models/qwen3/model/model.py): q_norm and k_norm, PyTorch's
    // composite rms_norm over head_dim (input.to(fp32), pow, mean, rsqrt, mul, type_as,
    // `* weight`), then RoPE on the bf16 norm outputs.
    auto head_norm = [&](const char* const names[3], std::int64_t w) -> HandleId {
      const std::int64_t heads = w / f_.head_dim;
      make(names[0], 4 * n * w, true);  // saved by pow and mul
      HandleId sq = make("fwd.norm_pow", 4 * n * w, false);
      HandleId mean = make("fwd.norm_mean", 4 * n * heads, false);
      release(sq);
      make(names[1], 4 * n * heads, true);  // rsqrt: saved by rsqrt and mul
      release(mean);
      HandleId scaled = make("fwd.norm_scaled", 4 * n * w, false);
      make(names[2], 2 * n * w, true);  // type_as: saved by `* weight`
      release(scaled);
      return make("fwd.qk_norm_out", 2 * n * w, false);
    };
    // (x * cos) + (rotate_half(x) * sin); rotate_half = cat(-x2, x1) on the halves.
    auto rope = [&](HandleId in, std::int64_t w, const char* out_name, bool keep) -> HandleId {
      HandleId by_cos = make("fwd.rope_cos_mul", 2 * n * w, false);
      HandleId neg = make("fwd.rope_neg", n * w, false);
      HandleId rotated = make("fwd.rope_rotate_half", 2 * n * w, false);
      release(neg);
      HandleId by_sin = make("fwd.rope_sin_mul", 2 * n * w, false);
      release(rotated);
      HandleId out = make(out_name, 2 * n * w, keep);
      release(by_cos);
      release(by_sin);
      release(in);
      return out;
    };
    static const char* const kQ[3] = {"qnorm.x_fp32", "qnorm.rstd", "qnorm.normed"};
    static const char* const kK[3] = {"knorm.x_fp32", "knorm.rstd", "knorm.normed"};
    HandleId qn = head_norm(kQ, q);
    release(xq);
    HandleId kn = head_norm(kK, kv);
    release(xk);
    // cos / sin: bf16 copies of rope_cache[:seq], saved by the multiplies.
    make("rope.cos", 2 * f_.seq_length * f_.head_dim, true);
    make("rope.sin", 2 * f_.seq_length * f_.head_dim, true);
    rope(qn, q, "sdpa.q", true);
    kr = rope(kn, kv, k_rotated, !f_.repeat_kv);
  } else if (!fused) {
    make("rope.q_fp32", 4 * n * q, true);
    HandleId pq = make("fwd.rope_q", 4 * n * q, false);
    make("sdpa.q", 2 * n * q, true);
    release(pq);
    release(xq);
    make("rope.k_fp32", 4 * n * kv, true);
    HandleId pk = make("fwd.rope_k", 4 * n * kv, false);
    kr = make(k_rotated, 2 * n * kv, !f_.repeat_kv);
    release(pk);
    release(xk);
  } else {
    make("sdpa.q", 2 * n * q, true);
    release(xq);
    kr = make(k_rotated, 2 * n * kv, !f_.repeat_kv);
    release(xk);
  }
  if (f_.repeat_kv) {  // expand + reshape materialises n_heads copies
    make("sdpa.k", 2 * n * kvs, true);
    release(kr);
    make("sdpa.v", 2 * n * kvs, true);
    release(xv);
  }
  std::vector<HandleId> ring;
  if (f_.cp > 1 && !(recompute && sac)) {
    // Context parallel SDPA (torch distributed/tensor/experimental/_attention.py
    // _templated_ring_attention, torchtitan's default "allgather" rotate method): k and v
    // made contiguous, concatenated, all-gathered over CP once; the merger keeps the output
    // in fp32 (convert_to_f32).
    for (auto [name, bytes] :
         {std::pair{"fwd.ring_k", 2 * n * kvs}, std::pair{"fwd.ring_v", 2 * n * kvs},
          std::pair{"fwd.ring_kv_cat", 4 * n * kvs},
          std::pair{"fwd.ring_kv_all_gather", 4 * n * kvs * f_.cp},
          std::pair{"fwd.ring_out_fp32", 4 * n * q}}) {
      ring.push_back(make(name, bytes, false));
    }
  }
  make("sdpa.out", 2 * n * q, true, true);
  make("sdpa.lse", 4 * n * f_.heads_local, true, true);
  for (HandleId t : ring) release(t);
  HandleId wo = make("fwd.wo_out", 2 * n * h, false);
  if (tp) {
    HandleId scattered = make("fwd.wo_reduce_scatter", 2 * r * h, false);
    release(wo);
    wo = scattered;
  }
  HandleId mid = make("residual.mid", 2 * r * h, fused);  // h = x + attention(...)
  release(wo);
  norm("norm2.x_fp32", "norm2.normed", "mlp.gemm_input");
  make("mlp.w1_out", 2 * n * ffn, true, true);
  if (!fused) make("mlp.silu_out", 2 * n * ffn, true);
  make("mlp.w3_out", 2 * n * ffn, true);
  make("mlp.w2_in", 2 * n * ffn, true);
  HandleId out = kNone;
  if (!recompute) {  // non-reentrant checkpoint stops recomputing after the last saved tensor
    // Compiled, the partitioner does not save w2's output (backward never reads it).
    HandleId w2 = make("sac.w2_out", 2 * n * h, false, /*must_save=*/!fused);
    if (tp) {
      HandleId scattered = make("fwd.w2_reduce_scatter", 2 * r * h, false);
      release(w2);
      w2 = scattered;
    }
    out = Alloc(2 * r * h, "act.block_input");  // out = h + feed_forward(...)
    release(w2);
  }
  release(mid);
  for (auto& e : live) {
    if (e.keep) {
      kept.push_back({e.name, e.h});
    } else {
      Free(e.h);
    }
  }
  if (recompute && sac) {  // the policy's cached outputs are consumed by the recompute
    for (auto& t : kept) {
      if (std::string_view(t.name).substr(0, 4) == "sac.") Free(t.handle);
    }
  }
  return out;
}

// Runs estimate/fsdp2_backward.h's op sequences as allocation events.
struct Fsdp2Generator::Exec {
  Fsdp2Generator& gen;
  std::vector<Named>* saved = nullptr;
  std::vector<HandleId>* weight_grads = nullptr;
  std::vector<HandleId> ids;
  int Adopt(HandleId h) {
    ids.push_back(h);
    return static_cast<int>(ids.size()) - 1;
  }
  int Alloc(std::int64_t bytes, const char* name) { return Adopt(gen.Alloc(bytes, name)); }
  void Free(int id) {
    if (id >= 0) gen.Free(ids[id]);
  }
  void Take(const char* name) {
    for (auto it = saved->begin(); it != saved->end(); ++it) {
      if (std::string_view(it->name) == name) {
        gen.Free(it->handle);
        saved->erase(it);
        return;
      }
    }
  }
  void WeightGrad(std::int64_t bytes) {
    weight_grads->push_back(gen.Alloc(bytes, "grad.unsharded"));
  }
};

alloc::HandleId Fsdp2Generator::NormBackward(bool fused) {
  Exec x{*this, nullptr, nullptr, {}};
  return x.ids[tensors::Fsdp2NormBackward(f_, fused, x)];
}

alloc::HandleId Fsdp2Generator::FinalNorm(std::vector<Named>& kept) {
  const std::int64_t r = f_.tokens / f_.tp, h = f_.hidden;
  kept.push_back({"final_norm.x_fp32", Alloc(4 * r * h, "final_norm.x_fp32")});
  HandleId sq = Alloc(4 * r * h, "fwd.norm_pow");
  HandleId scaled = Alloc(4 * r * h, "fwd.norm_scaled");
  Free(sq);
  kept.push_back({"final_norm.normed", Alloc(2 * r * h, "final_norm.normed")});
  Free(scaled);
  return Alloc(2 * r * h, "final_norm.out");
}

alloc::HandleId Fsdp2Generator::BlockBackward(HandleId grad_out, std::vector<Named>& saved,
                                              std::vector<HandleId>& weight_grads) {
  Exec x{*this, &saved, &weight_grads, {}};
  const int dx = tensors::Fsdp2BlockBackward(f_, x.Adopt(grad_out), x);
  for (auto& t : saved) Free(t.handle);  // the checkpoint input and any policy leftovers
  saved.clear();
  return x.ids[dx];
}

}  // namespace memtune::synth
