// The embedding (first pipeline stage) and the output layer with the loss (last stage).
#include <algorithm>

#include "steptime/layer_time.h"

namespace memtune::steptime {

LayerTime EmbeddingTime(const LayerContext& ctx) {
  const double h = static_cast<double>(ctx.job->model.hidden_size);
  LayerTime out;
  // A gather of token rows forward, a scatter-add into the table's gradient backward.
  out.forward.elementwise = MemorySeconds(ctx.tokens_sp * h * 2 * 2, ctx.hw);
  out.backward.elementwise = MemorySeconds(ctx.tokens_sp * h * 2 * 3, ctx.hw);
  out.forward.host = 2 * kHostOpSeconds;
  out.backward.host = 2 * kHostOpSeconds;
  return out;
}

LayerTime OutputLayerTime(const LayerContext& ctx) {
  const model::Job& job = *ctx.job;
  const double h = static_cast<double>(job.model.hidden_size);
  const double vocab = static_cast<double>(model::PaddedVocabSize(job)) / ctx.tp;
  LayerTime out;
  // Final norm, then the vocab-parallel output GEMM in BF16 (Megatron keeps it out of FP8),
  // its gradient GEMMs, and the cross entropy over the [tokens, vocab / tp] logits:
  // softmax statistics, the loss and the logits gradient (fused kernels read the logits
  // about twice forward and twice backward; native PyTorch upcasts to FP32 first).
  out.forward.elementwise = MemorySeconds(ctx.tokens_sp * h * 2 * 2, ctx.hw);
  out.backward.elementwise = MemorySeconds(ctx.tokens_sp * h * 2 * 3, ctx.hw);
  out.forward.gemm = GemmSeconds(ctx.tokens, vocab, h, GemmDtype::kBf16, ctx.hw);
  out.backward.gemm =
      GemmSeconds(ctx.tokens, h, vocab, GemmDtype::kBf16, ctx.hw) +
      (ctx.frozen ? 0 : GemmSeconds(vocab, h, ctx.tokens, GemmDtype::kBf16, ctx.hw));
  const bool fused = job.model.cross_entropy_loss_fusion;
  const double logit_bytes = ctx.tokens * vocab * 2;
  out.forward.elementwise += MemorySeconds(logit_bytes * (fused ? 2 : 6), ctx.hw);
  out.backward.elementwise += MemorySeconds(logit_bytes * (fused ? 2 : 5), ctx.hw);
  if (ctx.sp) {  // all-gather of the final norm's output, reduce-scatter of its gradient
    const double bytes = ctx.tokens * h * 2;
    out.forward.comm_exposed =
        CollectiveSeconds(Collective::kAllGather, bytes, ctx.tp, ctx.tp_link);
    out.backward.comm_exposed =
        CollectiveSeconds(Collective::kReduceScatter, bytes, ctx.tp, ctx.tp_link);
  }
  out.forward.host = (fused ? 6 : 12) * kHostOpSeconds;
  out.backward.host = out.forward.host * 2;
  return out;
}

}  // namespace memtune::steptime
