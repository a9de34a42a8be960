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
#include "tensors/fsdp2_forward.h"

namespace memtune::synth {

using tensors::Fsdp2Ac;

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
  void Keep(const char* name, int id) { saved->push_back({name, ids[id]}); }
};

alloc::HandleId Fsdp2Generator::BlockForward(int layer, bool recompute, std::vector<Named>& kept) {
  Exec x{*this, &kept, nullptr, {}};
  const int out = tensors::Fsdp2BlockForward(f_, f_.Checkpointed(layer), recompute, x);
  if (recompute && f_.ac == Fsdp2Ac::kSelectiveOp) {
    // The policy's cached outputs are consumed by the recompute.
    for (auto& t : kept) {
      if (std::string_view(t.name).substr(0, 4) == "sac.") Free(t.handle);
    }
  }
  return out >= 0 ? x.ids[out] : kNone;
}

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
