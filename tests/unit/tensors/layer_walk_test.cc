// The Megatron layer walk (tensors/layer_walk.h) walked in bytes: its backward peak is the
// estimator's closed form for a layer in backward, its saved tensors plus
// LayerBackwardWorkspace (the trace generator emits the same walk).
#include "tensors/layer_walk.h"

#include <gtest/gtest.h>

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "unit/estimate/test_jobs.h"

namespace memtune::tensors {
namespace {

using estimate::testing::Llama70BJob;
using estimate::testing::TinyJob;

// Walk peak minus closed form for each layer kind the job has.
void ExpectWalkPeakIsClosedForm(const model::Job& job, const std::string& what) {
  const ActContext ctx = MakeActContext(job);
  const LayerShape shape{ctx.hid_div > 1,
                         ctx.act_bytes * (job.model.hidden_size / ctx.hid_div) * ctx.tokens};
  for (bool moe : {false, true}) {
    if (moe && job.model.num_moe_experts.value_or(0) == 0) continue;
    for (bool fp8 : {false, true}) {
      const LayerSizes z = MakeLayerSizes(ctx, moe, fp8);
      const std::int64_t closed = SumBytes(z.kept) + LayerBackwardWorkspace(ctx, moe, fp8, z.kept);
      EXPECT_EQ(WalkLayerBackwardPeak(z, shape), closed)
          << what << " moe " << moe << " fp8 " << fp8;
    }
  }
}

TEST(LayerWalkTest, BackwardPeakIsSavedTensorsPlusWorkspace) {
  ExpectWalkPeakIsClosedForm(TinyJob(), "tiny");
  auto sp = TinyJob();
  sp.model.tensor_model_parallel_size = 2;
  sp.model.sequence_parallel = true;
  ExpectWalkPeakIsClosedForm(sp, "tiny sp");
  ExpectWalkPeakIsClosedForm(Llama70BJob(), "llama 70b fp8 core_attn recompute");
  auto no_recompute = Llama70BJob();
  no_recompute.model.recompute_granularity = model::RecomputeGranularity::kNone;
  no_recompute.model.recompute_modules = {};
  ExpectWalkPeakIsClosedForm(no_recompute, "llama 70b no recompute");
}

TEST(LayerWalkTest, MoeAndSelectiveRecomputeBackwardPeak) {
  auto moe = TinyJob();
  moe.model.num_moe_experts = 4;
  moe.model.moe_ffn_hidden_size = 16;
  moe.model.moe_router_topk = 2;
  ExpectWalkPeakIsClosedForm(moe, "moe");
  moe.model.recompute_granularity = model::RecomputeGranularity::kSelective;
  moe.model.recompute_modules = {"moe_act", "layernorm"};
  ExpectWalkPeakIsClosedForm(moe, "moe selective");
}

// Unfused attention: the closed form counts the score-sized gradients on top of every saved
// tensor, an upper bound; the walk frees the MLP's saved tensors before them.
TEST(LayerWalkTest, UnfusedAttentionBackwardPeakIsBoundedByTheClosedForm) {
  for (const model::AttentionBackend impl :
       {model::AttentionBackend::kUnfused, model::AttentionBackend::kLocal}) {
    auto job = Llama70BJob();
    job.model.attention_backend = impl;
    if (impl == model::AttentionBackend::kLocal)
      job.model.transformer_impl = model::TransformerImpl::kLocal;
    const ActContext ctx = MakeActContext(job);
    const LayerShape shape{ctx.hid_div > 1,
                           ctx.act_bytes * (job.model.hidden_size / ctx.hid_div) * ctx.tokens};
    const LayerSizes z = MakeLayerSizes(ctx, false, true);
    const std::int64_t closed = SumBytes(z.kept) + LayerBackwardWorkspace(ctx, false, true, z.kept);
    const std::int64_t walk = WalkLayerBackwardPeak(z, shape);
    EXPECT_LE(walk, closed) << model::NameOf(impl);
    EXPECT_GE(walk, SumBytes(z.kept)) << model::NameOf(impl);
  }
}

// The output layer's walked backward peak is the estimator's: the kept final-norm and
// output-layer inputs and logits, the logits gradient, and what the output layer's backward
// adds once the kept logits are freed (JobFacts::output_backward_extra).
TEST(LayerWalkTest, OutputBackwardPeakIsTheEstimatorsLogitsTransient) {
  auto unfused_loss = Llama70BJob();
  unfused_loss.model.cross_entropy_loss_fusion = false;
  auto te_loss = Llama70BJob();
  te_loss.model.cross_entropy_fusion_impl = model::CrossEntropyFusionImpl::kTe;
  auto no_fusion = Llama70BJob();
  no_fusion.model.gradient_accumulation_fusion = false;
  auto tiny_no_fusion = TinyJob();
  tiny_no_fusion.model.gradient_accumulation_fusion = false;
  for (const auto& [what, job] :
       {std::pair{"llama", Llama70BJob()}, std::pair{"unfused loss", unfused_loss},
        std::pair{"te loss", te_loss}, std::pair{"no fusion", no_fusion},
        std::pair{"tiny", TinyJob()}, std::pair{"tiny no fusion", tiny_no_fusion}}) {
    const JobFacts f = MakeJobFacts(job, std::nullopt);
    EXPECT_EQ(WalkOutputBackwardPeak(f), f.logits_per_mb + f.output_hidden_per_mb +
                                             f.logits_transient + f.output_backward_extra)
        << what;
  }
}

// An executor that counts live bytes and names (the contract of layer_walk.h).
class Live {
 public:
  using Handle = int;
  static constexpr Handle kNone = -1;
  Handle Alloc(std::int64_t bytes, const char*) {
    if (bytes == 0) return kNone;
    sizes_.push_back(bytes);
    live_ += bytes;
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
  void Recompute(bool on) { recomputing_ = on; }
  std::int64_t live() const { return live_; }
  int held() const {
    int n = 0;
    for (Handle h : slots_) n += h != kNone;
    return n;
  }

 private:
  std::vector<std::int64_t> sizes_;
  std::array<Handle, kLayerSlots> slots_ = [] {
    std::array<Handle, kLayerSlots> s;
    s.fill(kNone);
    return s;
  }();
  std::int64_t live_ = 0;
  bool recomputing_ = false;
};

// The forward leaves the saved tensors and its output; the backward frees every one of them
// and leaves only the input gradient; a checkpointed layer keeps only its input.
TEST(LayerWalkTest, ForwardKeepsTheSavedTensorsAndBackwardFreesThem) {
  const auto job = Llama70BJob();
  const ActContext ctx = MakeActContext(job);
  const LayerShape shape{ctx.hid_div > 1,
                         ctx.act_bytes * (job.model.hidden_size / ctx.hid_div) * ctx.tokens};
  const LayerSizes z = MakeLayerSizes(ctx, false, true);
  ASSERT_GT(z.q_bytes, 0);  // act.attn_qkv split into three
  ASSERT_EQ(z.kept[kLn1Input], shape.local_hidden);
  Live x;
  const int output = LayerForward(z, shape, LayerKeep::kAll, x.Alloc(shape.local_hidden, "in"), x);
  EXPECT_EQ(x.live(), SumBytes(z.kept) + shape.local_hidden);
  x.Free(output);
  const int grad_in = LayerBackward(z, shape, x.Alloc(shape.local_hidden, "grad"), x);
  EXPECT_EQ(x.held(), 0);
  EXPECT_EQ(x.live(), shape.local_hidden);
  x.Free(grad_in);
  Live ckpt;
  ckpt.Free(LayerForward(z, shape, LayerKeep::kCheckpointInput,
                         ckpt.Alloc(shape.local_hidden, "in"), ckpt));
  EXPECT_EQ(ckpt.live(), shape.local_hidden);
  EXPECT_EQ(ckpt.held(), 1);
}

}  // namespace
}  // namespace memtune::tensors
