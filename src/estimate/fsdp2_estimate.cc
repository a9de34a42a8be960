// The accurate estimate of a torchtitan FSDP2 job: one rank class (every FSDP/TP rank is
// alike), its peak over three moments of a steady-state step (docs/estimator.md "FSDP2"):
//   loss backward  - every block's saved activations, the root and last block unsharded,
//                    the log-softmax output with its incoming and outgoing fp32 gradients;
//   last block backward - the block's recompute and gradients, two blocks unsharded;
//   a block's reduce-scatter - its gradients on their way to shards, two fp32 inputs held;
//   root reduce-scatter - the embedding's dense gradient and the root's fp32 input;
//   optimizer step - gradients plus foreach AdamW's sqrt temporary.
#include "fsdp2_estimate.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "fsdp2_tensors.h"

namespace memtune::estimate::internal {
namespace {

using Parts = std::vector<Component>;

void Add(Parts& parts, const char* name, std::int64_t bytes, ComponentKind kind, const char* why, bool explain) {
  if (bytes <= 0) return;
  parts.push_back(Component{name, bytes, kind, false, explain ? why : ""});
}

std::int64_t Total(const Parts& parts) {
  std::int64_t total = 0;
  for (const auto& c : parts) total += c.bytes;
  return total;
}

// Model state present at every moment of a steady-state step (optimizer state exists from
// the first step on; gradients are set to None by zero_grad at the start of each step).
void AddState(const Fsdp2Facts& f, bool explain, Parts& parts) {
  const std::int64_t shard = f.BlockShardElements() * f.layers + f.RootShardElements();
  Add(parts, "params", 4 * shard, ComponentKind::kParameters,
      "fp32 parameter shards (FSDP2 DTensor, dim 0 padded to the shard degree)", explain);
  Add(parts, "opt.exp_avg", 4 * shard, ComponentKind::kOptimizer, "AdamW first moment (fp32, sharded)", explain);
  Add(parts, "opt.exp_avg_sq", 4 * shard, ComponentKind::kOptimizer, "AdamW second moment (fp32, sharded)",
      explain);
  Add(parts, "buffers", 8 * f.seq_length * (f.head_dim / 2), ComponentKind::kParameters,
      "freqs_cis: complex64 RoPE table (max_seq_len, head_dim / 2), replicated", explain);
}

std::int64_t GradBytes(const Fsdp2Facts& f) {
  return 4 * (f.BlockShardElements() * f.layers + f.RootShardElements());
}

// Output and final-norm weights: their unsharded gradients come first in backward and wait
// for the root's reduce-scatter at its end.
std::int64_t HeadElements(const Fsdp2Facts& f) {
  std::int64_t elements = 0;
  for (const auto& p : f.root_params) {
    if (std::string(p.name) != "tok_embeddings.weight") elements += p.Elements();
  }
  return elements;
}

std::int64_t SavedBlocks(const Fsdp2Facts& f, int count) {
  std::int64_t total = 0;
  for (int l = 0; l < count; ++l) total += f.BlockKeptBytes(l);
  return total;
}

// Blocks left unsharded after forward: torchtitan keeps the last block gathered (it is
// the first one backward needs); reshard_after_forward false keeps them all.
int UnshardedAfterForward(const Fsdp2Facts& f) { return f.reshard_after_forward ? 1 : f.layers; }

Parts LossBackward(const Fsdp2Facts& f, bool explain) {
  Parts parts;
  AddState(f, explain, parts);
  if (f.microbatches > 1) {
    Add(parts, "grads", GradBytes(f), ComponentKind::kGradients,
        "fp32 gradient shards accumulated by the earlier micro-batches", explain);
  }
  Add(parts, "fsdp.root_unsharded", f.param_bytes * f.RootUnshardedElements(), ComponentKind::kTransient,
      "root group (embedding, final norm, output) all-gathered; the root is not resharded after forward",
      explain);
  Add(parts, "fsdp.blocks_unsharded", f.param_bytes * f.BlockUnshardedElements() * UnshardedAfterForward(f),
      ComponentKind::kTransient, "blocks still all-gathered after forward (the last one; all without reshard)",
      explain);
  Add(parts, "act.blocks", SavedBlocks(f, f.layers), ComponentKind::kActivations,
      "tensors every block keeps for backward under its activation checkpointing", explain);
  Add(parts, "act.outside", f.OutsideBytes(), ComponentKind::kActivations,
      "token ids and labels, final-norm saved tensors, output-layer input", explain);
  Add(parts, "act.logits", f.LossBackwardTensors() * f.logits_fp32_bytes, ComponentKind::kLogits,
      f.loss_parallel ? "loss_parallel cross-entropy backward: fp32 log-softmax output, zeros_like, exp and "
                        "their sum"
                      : "cross-entropy backward: fp32 log-softmax output, its gradient and the input gradient",
      explain);
  return parts;
}

// What every moment inside the block backward holds: model state, the root gathered until
// its post-backward, the output and final-norm weight gradients waiting for the root's
// reduce-scatter, and the batch's token ids and labels.
Parts BackwardBase(const Fsdp2Facts& f, bool explain) {
  Parts parts;
  AddState(f, explain, parts);
  Add(parts, "fsdp.root_unsharded", f.param_bytes * f.RootUnshardedElements(), ComponentKind::kTransient,
      "root group all-gathered until the root's post-backward", explain);
  Add(parts, "grads.root_unsharded", f.param_bytes * HeadElements(f), ComponentKind::kTransient,
      "output and final-norm weight gradients, reduce-scattered with the root at the end of backward", explain);
  Add(parts, "act.tokens", 16 * f.tokens, ComponentKind::kActivations, "token ids and labels", explain);
  return parts;
}

Parts LastBlockBackward(const Fsdp2Facts& f, bool explain) {
  Parts parts = BackwardBase(f, explain);
  if (f.microbatches > 1) {
    Add(parts, "grads", GradBytes(f), ComponentKind::kGradients, "fp32 gradient shards", explain);
  }
  const int last = f.layers - 1;
  // The block in backward and the one prefetched (backward_prefetch 1); without reshard
  // after forward every block is still gathered.
  const int gathered = f.reshard_after_forward ? std::min(2, f.layers) : f.layers;
  Add(parts, "fsdp.blocks_unsharded", f.param_bytes * f.BlockUnshardedElements() * gathered,
      ComponentKind::kTransient, "blocks all-gathered during the last block's backward", explain);
  Add(parts, "act.blocks", SavedBlocks(f, last), ComponentKind::kActivations,
      "saved tensors of the blocks whose backward is still to come", explain);
  const std::int64_t own = f.Checkpointed(last) || f.ac == Fsdp2Ac::kSelectiveOp
                               ? f.BlockKeptBytes(last) + f.BlockEagerBytes()
                               : f.BlockEagerBytes();
  Add(parts, "act.block_recompute", own, ComponentKind::kActivations,
      "the last block's tensors for backward (recomputed under a checkpoint)", explain);
  Add(parts, "tmp.backward", f.BlockBackwardBytes(), ComponentKind::kTransient,
      "MLP input gradients and the block's unsharded weight gradients", explain);
  return parts;
}

// The reduce-scatter of block `l` (at its fp32 input's allocation): the blocks below it
// keep their activations, the blocks above have gradient shards, block l's bf16 weight
// gradients are being copied in, and the previous block's input is still held (FSDP2 frees
// it at the next reduce-scatter).
Parts BlockReduceScatter(const Fsdp2Facts& f, int l, bool explain) {
  Parts parts = BackwardBase(f, explain);
  Add(parts, "grads",
      f.microbatches > 1 ? GradBytes(f) : 4 * f.BlockShardElements() * (f.layers - 1 - l),
      ComponentKind::kGradients, "fp32 gradient shards of the blocks already reduce-scattered", explain);
  // Block l and the one prefetched for the next backward; without reshard after forward
  // every block not yet through its backward.
  const int gathered = f.reshard_after_forward ? (l > 0 ? 2 : 1) : l + 1;
  Add(parts, "fsdp.blocks_unsharded", f.param_bytes * f.BlockUnshardedElements() * gathered,
      ComponentKind::kTransient, "blocks all-gathered at this reduce-scatter", explain);
  Add(parts, "act.blocks", SavedBlocks(f, l), ComponentKind::kActivations,
      "saved tensors of the blocks whose backward is still to come", explain);
  std::int64_t unpadded = 0;
  for (const auto& p : f.block_params) unpadded += p.Elements();
  Add(parts, "grads.block_unsharded", f.param_bytes * unpadded, ComponentKind::kTransient,
      "the block's unsharded weight gradients, copied into the reduce-scatter input", explain);
  Add(parts, "fsdp.reduce_scatter_inputs",
      f.reduce_bytes * f.BlockUnshardedElements() * (l + 1 < f.layers ? 2 : 1), ComponentKind::kTransient,
      "reduce-scatter inputs (reduce_dtype) of this block and the previous one", explain);
  Add(parts, "tmp.backward", 2 * f.tokens / f.tp * f.hidden, ComponentKind::kTransient,
      "the gradient of the block's input", explain);
  return parts;
}

// The root's reduce-scatter at the very end of backward: every block's gradient shard, the
// root's bf16 gradients (output, final norm, the embedding's dense gradient) and its
// reduce-scatter input, with block 0's input still held.
Parts RootReduceScatter(const Fsdp2Facts& f, bool explain) {
  Parts parts;
  AddState(f, explain, parts);
  Add(parts, "grads",
      f.microbatches > 1 ? GradBytes(f) : 4 * f.BlockShardElements() * f.layers, ComponentKind::kGradients,
      "fp32 gradient shards of every block", explain);
  Add(parts, "fsdp.root_unsharded", f.param_bytes * f.RootUnshardedElements(), ComponentKind::kTransient,
      "root group still all-gathered", explain);
  std::int64_t root_elements = 0;
  for (const auto& p : f.root_params) root_elements += p.Elements();
  Add(parts, "grads.root_unsharded", f.param_bytes * root_elements, ComponentKind::kTransient,
      "output, final-norm and embedding (dense) weight gradients, copied into the reduce-scatter input", explain);
  Add(parts, "fsdp.reduce_scatter_inputs",
      f.reduce_bytes * (f.RootUnshardedElements() + f.BlockUnshardedElements()), ComponentKind::kTransient,
      "reduce-scatter inputs of the root and of block 0 (held until this one)", explain);
  Add(parts, "act.tokens", 16 * f.tokens, ComponentKind::kActivations, "token ids and labels", explain);
  return parts;
}

Parts OptimizerStep(const Fsdp2Facts& f, bool explain) {
  Parts parts;
  AddState(f, explain, parts);
  Add(parts, "grads", GradBytes(f), ComponentKind::kGradients,
      "fp32 gradient shards (reduce-scatter outputs)", explain);
  Add(parts, "tmp.step", GradBytes(f), ComponentKind::kTransient,
      "foreach AdamW: _foreach_sqrt(exp_avg_sq), one fp32 tensor per parameter shard", explain);
  return parts;
}

}  // namespace

Result<Estimate> EstimateFsdp2(const model::Job& job, const EstimateOptions& options) {
  MEMTUNE_TRY(const Fsdp2Facts f, MakeFsdp2Facts(job));
  const bool explain = options.with_explanations;
  // The reduce-scatter moments are linear in the block index but for selective_layer's
  // alternation, so the top three blocks and block 0 bound them.
  std::vector<std::pair<const char*, Parts>> moments;
  moments.emplace_back("loss backward", LossBackward(f, explain));
  moments.emplace_back("backward", LastBlockBackward(f, explain));
  std::vector<int> blocks{0};
  for (int l = std::max(1, f.layers - 3); l < f.layers; ++l) blocks.push_back(l);
  for (int l : blocks) moments.emplace_back("backward", BlockReduceScatter(f, l, explain));
  moments.emplace_back("backward", RootReduceScatter(f, explain));
  moments.emplace_back("optimizer step", OptimizerStep(f, explain));
  std::size_t best = 0;
  RankEstimate rank;
  for (std::size_t i = 0; i < moments.size(); ++i) {
    const std::int64_t total = Total(moments[i].second);
    if (total > Total(moments[best].second)) best = i;
    if (i + 1 < moments.size()) rank.backward_peak_bytes = std::max(rank.backward_peak_bytes, total);
  }
  rank.step_peak_bytes = Total(moments.back().second);
  rank.pp_rank = 0;
  rank.components = std::move(moments[best].second);
  rank.peak_phase = moments[best].first;
  rank.allocated_bytes = Total(rank.components);
  rank.layers = f.layers;
  rank.in_flight_microbatches = 1;
  for (const auto& c : rank.components) {
    switch (c.kind) {
      case ComponentKind::kParameters: case ComponentKind::kGradients: case ComponentKind::kOptimizer:
        rank.model_state_bytes += c.bytes;
        break;
      case ComponentKind::kActivations: case ComponentKind::kLogits: rank.activation_bytes += c.bytes; break;
      case ComponentKind::kTransient: rank.transient_bytes += c.bytes; break;
    }
  }
  rank.dense_bytes = rank.model_state_bytes;
  Estimate e;
  e.mode = Mode::kAccurate;
  e.peak_pp_rank = 0;
  e.peak_allocated_bytes = rank.allocated_bytes;
  e.ranks.push_back(std::move(rank));
  if (explain) {
    e.assumptions = {
        "torchtitan Llama under FSDP2 (torchtitan 9dec370): eager RMSNorm/RoPE, flash SDPA, "
        "cross-entropy on an fp32 copy of the logits",
        "foreach AdamW (torchtitan default), gradients set to None at the start of each step",
        "peak of max_allocated; max_reserved comes from replaying the synthesized trace",
    };
    if (f.compile) {
      e.assumptions.push_back("torch.compile per block: fused RMSNorm, RoPE and SiLU*mul keep no fp32 or "
                              "pointwise intermediates; the checkpoint policy decides what is saved");
    }
    if (f.float8) {
      e.assumptions.push_back("float8 linears (torchao) save the same bf16 activations as bf16 linears; fp8 "
                              "casts are transient");
    }
  }
  return e;
}

}  // namespace memtune::estimate::internal
