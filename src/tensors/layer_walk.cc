// The layer sizes the walk reads, and the walks in bytes (layer_walk.h).
#include "tensors/layer_walk.h"

#include <algorithm>
#include <vector>

namespace memtune::tensors {

LayerSizes MakeLayerSizes(const ActContext& ctx, bool moe, bool fp8) {
  LayerSizes z;
  z.kept = LayerActivations(ctx, moe, fp8);
  z.dropped = LayerRecomputedTensors(ctx, moe, fp8);
  z.fwd = LayerForwardTransients(ctx, moe, fp8);
  z.bwd = LayerBackwardTransients(ctx, moe, fp8);
  z.attn_bwd = LayerAttentionBackwardTransients(ctx, fp8);
  z.offloaded = OffloadedTensors(ctx, moe, z.kept);
  z.shared_side_stream = moe && ctx.shared_stream;
  if (!ctx.mla && !(ctx.unfused_attn && ctx.gqa)) {
    // activations.h kAttnQkv: q, k and the rest (v, or the linear_qkv output a saved v view
    // keeps alive): split it so the trace names each.
    z.q_bytes = ctx.act_bytes * ctx.q_width / ctx.tp * ctx.tokens;
    z.k_bytes = ctx.act_bytes * ctx.kv_width_per_rank * ctx.tokens;
    if (z.kept[kAttnQkv] <= z.q_bytes + z.k_bytes) z.q_bytes = z.k_bytes = 0;
  }
  return z;
}

namespace {

// The walk's executor in bytes: live bytes and their highest point.
class PeakWalk {
 public:
  using Handle = int;
  static constexpr Handle kNone = -1;

  Handle Alloc(std::int64_t bytes, const char*) {
    if (bytes == 0) return kNone;
    sizes_.push_back(bytes);
    live_ += bytes;
    peak_ = std::max(peak_, live_);
    return static_cast<Handle>(sizes_.size()) - 1;
  }
  void Free(Handle h) {
    if (h == kNone) return;
    live_ -= sizes_[h];
    sizes_[h] = 0;
  }
  void Hold(int slot, Handle h) { slots_[slot] = h; }
  Handle Held(int slot) const { return slots_[slot]; }
  void Release(int slot) { Free(std::exchange(slots_[slot], kNone)); }
  void Recompute(bool) {}

  void ResetPeak() { peak_ = live_; }
  std::int64_t peak() const { return peak_; }

 private:
  std::vector<std::int64_t> sizes_;
  std::array<Handle, kLayerSlots> slots_ = MakeEmptySlots();
  std::int64_t live_ = 0, peak_ = 0;
  static std::array<Handle, kLayerSlots> MakeEmptySlots() {
    std::array<Handle, kLayerSlots> slots;
    slots.fill(kNone);
    return slots;
  }
};

}  // namespace

std::int64_t WalkLayerBackwardPeak(const LayerSizes& z, const LayerShape& s) {
  PeakWalk walk;
  const int input = walk.Alloc(s.local_hidden, "act.ln1_input");
  walk.Free(LayerForward(z, s, LayerKeep::kAll, input, walk));  // the next layer's input
  walk.ResetPeak();
  LayerBackward(z, s, walk.Alloc(s.local_hidden, "bwd.grad_out"), walk);
  return walk.peak();
}

std::int64_t WalkOutputBackwardPeak(const JobFacts& f) {
  PeakWalk walk;
  const auto held =
      OutputForward(f, walk.Alloc(f.local_hidden_per_mb, "act.final_norm_input"), walk);
  walk.ResetPeak();
  int deferred = PeakWalk::kNone;
  walk.Free(OutputBackward(f, held, false, deferred, walk));
  return walk.peak();
}

}  // namespace memtune::tensors
