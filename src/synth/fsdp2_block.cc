// One torchtitan transformer block's forward and backward allocations (docs/synth.md
// "FSDP2"), op by op as torchtitan 9dec370 models/llama/model.py runs them: RMSNorm on
// x.float(), wq/wk/wv, complex RoPE on fp32 copies, repeat_kv, flash SDPA, wo, residual,
// RMSNorm, w2(silu(w1 x) * w3 x), residual. Under TP (sequence parallel) the norm outputs
// are all-gathered before the column-parallel GEMMs and the row-parallel outputs
// reduce-scattered. torch.compile fuses the norm, RoPE and SiLU*mul (no fp32 or pointwise
// intermediates). Which tensors survive the forward is the AC mode's choice.
#include <algorithm>
#include <utility>
#include <string_view>
#include <tuple>

#include "synth/fsdp2_generator.h"

namespace memtune::synth {

using estimate::internal::Fsdp2Ac;

namespace {

// Indices into Fsdp2Facts::block_params (fsdp2_tensors.cc AddParams order).
enum BlockParam { kAttnNorm, kWq, kWk, kWv, kWo, kFfnNorm, kW1, kW2, kW3 };

}  // namespace

alloc::HandleId Fsdp2Generator::BlockForward(int layer, HandleId x, bool recompute, std::vector<Named>& kept) {
  (void)x;  // the input's bytes are already allocated; the ops read it
  const bool sac = f_.ac == Fsdp2Ac::kSelectiveOp;
  // kEager: the tensors autograd saves (no checkpoint, or a recompute re-creating them);
  // kSac: the policy's MUST_SAVE outputs; kNothing: a fully checkpointed block.
  enum class Keep { kEager, kSac, kNothing };
  const Keep mode = recompute || !f_.Checkpointed(layer) ? Keep::kEager : sac ? Keep::kSac : Keep::kNothing;
  struct Entry {
    const char* name;
    HandleId h;
    bool keep;
  };
  std::vector<Entry> live;
  auto make = [&](const char* name, std::int64_t bytes, bool eager, bool must_save = false) -> HandleId {
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
  const std::int64_t n = f_.tokens, r = f_.tokens / f_.tp, h = f_.hidden, q = f_.q_local, kv = f_.kv_local;
  const std::int64_t ffn = f_.ffn_local, kvs = f_.repeat_kv ? q : kv;
  const bool tp = f_.tp > 1, fused = f_.compile;
  auto norm = [&](const char* xf_name, const char* normed_name, const char* gemm_name) -> HandleId {
    if (!fused) {
      make(xf_name, 4 * r * h, true);                     // pow saves x.float()
      HandleId sq = make("fwd.norm_pow", 4 * r * h, false);
      HandleId scaled = make("fwd.norm_scaled", 4 * r * h, false);
      release(sq);
      make(normed_name, 2 * r * h, true);                 // `* weight` saves it
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
  HandleId kr;
  if (!fused) {
    make("rope.q_fp32", 4 * n * q, true);
    HandleId pq = make("fwd.rope_q", 4 * n * q, false);
    make("sdpa.q", 2 * n * q, true);
    release(pq);
    release(xq);
    make("rope.k_fp32", 4 * n * kv, true);
    HandleId pk = make("fwd.rope_k", 4 * n * kv, false);
    kr = make(f_.repeat_kv ? "fwd.k_rot" : "sdpa.k", 2 * n * kv, !f_.repeat_kv);
    release(pk);
  } else {
    make("sdpa.q", 2 * n * q, true);
    release(xq);
    kr = make(f_.repeat_kv ? "fwd.k_rot" : "sdpa.k", 2 * n * kv, !f_.repeat_kv);
  }
  release(xk);
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
    for (auto [name, bytes] : {std::pair{"fwd.ring_k", 2 * n * kvs}, std::pair{"fwd.ring_v", 2 * n * kvs},
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
    HandleId w2 = make("sac.w2_out", 2 * n * h, false, true);
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

alloc::HandleId Fsdp2Generator::NormBackward(bool fused) {
  const std::int64_t r = f_.tokens / f_.tp, h = f_.hidden;
  if (fused) return Alloc(2 * r * h, "bwd.norm_dgrad");
  // MulBackward (weight) in bf16, ToCopyBackward to fp32, then the x * rsqrt and the
  // pow/mean branches in fp32, summed, and the x.float() backward back to bf16.
  HandleId weighted = Alloc(2 * r * h, "bwd.norm_weighted");
  HandleId up = Alloc(4 * r * h, "bwd.norm_fp32");
  Free(weighted);
  HandleId direct = Alloc(4 * r * h, "bwd.norm_direct");
  HandleId branch = Alloc(4 * r * h, "bwd.norm_rsqrt_branch");
  HandleId sum = Alloc(4 * r * h, "bwd.norm_sum");
  Free(up);
  Free(direct);
  Free(branch);
  HandleId down = Alloc(2 * r * h, "bwd.norm_dgrad");
  Free(sum);
  return down;
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

alloc::HandleId Fsdp2Generator::BlockBackward(int layer, HandleId grad_out, std::vector<Named>& saved,
                                              std::vector<HandleId>& weight_grads) {
  (void)layer;
  auto take = [&](const char* name) {
    for (auto it = saved.begin(); it != saved.end(); ++it) {
      if (std::string_view(it->name) == name) {
        Free(it->handle);
        saved.erase(it);
        return;
      }
    }
  };
  auto wgrad = [&](BlockParam p) {
    weight_grads.push_back(Alloc(f_.param_bytes * f_.block_params[p].Elements(), "grad.unsharded"));
  };
  const std::int64_t n = f_.tokens, r = f_.tokens / f_.tp, h = f_.hidden, q = f_.q_local, kv = f_.kv_local;
  const std::int64_t ffn = f_.ffn_local, kvs = f_.repeat_kv ? q : kv;
  const bool tp = f_.tp > 1, fused = f_.compile;
  auto gather = [&]() { return tp ? Alloc(2 * n * h, "bwd.grad_all_gather") : kNone; };
  auto scatter = [&](HandleId& full) {
    if (!tp) return;
    HandleId local = Alloc(2 * r * h, "bwd.grad_reduce_scatter");
    Free(full);
    full = local;
  };
  // Feed-forward: w2 dgrad, the SiLU * mul backward, w3 and w1 dgrads summed.
  HandleId g = gather();
  HandleId dp = Alloc(2 * n * ffn, "bwd.w2_dgrad");
  wgrad(kW2);
  take("mlp.w2_in");
  Free(g);
  HandleId ds = fused ? kNone : Alloc(2 * n * ffn, "bwd.silu_out_grad");
  HandleId db = Alloc(2 * n * ffn, "bwd.w3_out_grad");
  HandleId da = fused ? Alloc(2 * n * ffn, "bwd.w1_out_grad") : kNone;
  Free(dp);
  take("mlp.silu_out");
  take("mlp.w3_out");
  if (!fused) {
    da = Alloc(2 * n * ffn, "bwd.w1_out_grad");
    Free(ds);
  }
  take("mlp.w1_out");
  HandleId dx3 = Alloc(2 * n * h, "bwd.w3_dgrad");
  wgrad(kW3);
  Free(db);
  HandleId dx1 = Alloc(2 * n * h, "bwd.w1_dgrad");
  wgrad(kW1);
  Free(da);
  HandleId dmlp = Alloc(2 * n * h, "bwd.mlp_dgrad");
  Free(dx1);
  Free(dx3);
  take("mlp.gemm_input");
  scatter(dmlp);
  HandleId dn2 = NormBackward(fused);
  wgrad(kFfnNorm);
  take("norm2.x_fp32");
  take("norm2.normed");
  take("residual.mid");
  Free(dmlp);
  HandleId dh = Alloc(2 * r * h, "bwd.residual_grad");
  Free(dn2);
  Free(grad_out);
  // Attention: wo dgrad, flash backward (fp32 dq accumulator), repeat_kv and RoPE backward,
  // wq/wk/wv dgrads summed.
  g = gather();
  HandleId dout = Alloc(2 * n * q, "bwd.wo_dgrad");
  wgrad(kWo);
  Free(g);
  std::vector<HandleId> ring;
  if (f_.cp > 1) {
    // _templated_ring_attention_backward: fp32 accumulators for dq/dk/dv, k and v made
    // contiguous, concatenated and all-gathered again, dk/dv exchanged by all-to-all in fp32.
    for (auto [name, bytes] : {std::pair{"bwd.ring_dq_fp32", 4 * n * q}, std::pair{"bwd.ring_dkv_fp32", 8 * n * kvs},
                               std::pair{"bwd.ring_kv", 4 * n * kvs}, std::pair{"bwd.ring_kv_cat", 4 * n * kvs},
                               std::pair{"bwd.ring_kv_all_gather", 4 * n * kvs * f_.cp},
                               std::pair{"bwd.ring_dkv_send", 8 * n * kvs},
                               std::pair{"bwd.ring_dkv_recv", 8 * n * kvs}}) {
      ring.push_back(Alloc(bytes, name));
    }
  }
  HandleId acc = Alloc(4 * n * q, "bwd.flash_dq_accum");
  HandleId dq = Alloc(2 * n * q, "bwd.flash_dq");
  HandleId dk = Alloc(2 * n * kvs, "bwd.flash_dk");
  HandleId dv = Alloc(2 * n * kvs, "bwd.flash_dv");
  Free(acc);
  Free(dout);
  FreeAll(ring);
  for (const char* t : {"sdpa.q", "sdpa.k", "sdpa.v", "sdpa.out", "sdpa.lse"}) take(t);
  if (f_.repeat_kv) {
    HandleId k = Alloc(2 * n * kv, "bwd.repeat_kv_k");
    Free(dk);
    dk = k;
    HandleId v = Alloc(2 * n * kv, "bwd.repeat_kv_v");
    Free(dv);
    dv = v;
  }
  if (!fused) {
    for (auto [grad, width, name] : {std::tuple{&dq, q, "rope.q_fp32"}, std::tuple{&dk, kv, "rope.k_fp32"}}) {
      HandleId up = Alloc(4 * n * width, "bwd.rope_fp32");
      HandleId down = Alloc(2 * n * width, "bwd.rope_dgrad");
      Free(up);
      Free(*grad);
      *grad = down;
      take(name);
    }
  }
  // wq/wk/wv dgrads, summed as they come (autograd accumulates the input gradient).
  HandleId total = kNone;
  for (auto [grad, param, name] : {std::tuple{&dq, kWq, "bwd.wq_dgrad"}, std::tuple{&dk, kWk, "bwd.wk_dgrad"},
                                   std::tuple{&dv, kWv, "bwd.wv_dgrad"}}) {
    HandleId dx = Alloc(2 * n * h, name);
    wgrad(param);
    Free(*grad);
    if (total == kNone) {
      total = dx;
      continue;
    }
    HandleId sum = Alloc(2 * n * h, "bwd.qkv_dgrad");
    Free(total);
    Free(dx);
    total = sum;
  }
  take("attn.gemm_input");
  scatter(total);
  HandleId dn1 = NormBackward(fused);
  wgrad(kAttnNorm);
  take("norm1.x_fp32");
  take("norm1.normed");
  Free(total);
  HandleId dx = Alloc(2 * r * h, "bwd.block_dgrad");
  Free(dn1);
  Free(dh);
  for (auto& t : saved) Free(t.handle);  // the checkpoint input and any policy leftovers
  saved.clear();
  return dx;
}

}  // namespace memtune::synth
