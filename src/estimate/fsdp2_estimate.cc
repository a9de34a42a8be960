// The accurate estimate of a torchtitan FSDP2 job: one rank class (every FSDP/TP rank is
// alike), its peak over these moments of a steady-state step (docs/estimator.md "FSDP2"):
//   loss backward  - every block's saved activations, the root and last block unsharded,
//                    the log-softmax output with its incoming and outgoing fp32 gradients
//                    (compiled loss: the bf16 logits, row statistics and the bf16 gradient);
//   last block backward - the block's recompute and gradients, two blocks unsharded;
//   a block's reduce-scatter - its gradients on their way to shards, two fp32 inputs held;
//   root reduce-scatter - the embedding's dense gradient and the root's fp32 input;
//   optimizer step - gradients plus foreach AdamW's sqrt temporary.
#include "fsdp2_estimate.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "fsdp2_parts.h"
#include "fsdp2_pipeline.h"
#include "tensors/fsdp2_backward.h"
#include "tensors/fsdp2_forward.h"
#include "tensors/fsdp2_tensors.h"

namespace memtune::estimate::internal {

using namespace ::memtune::tensors;  // NOLINT(google-build-using-namespace): the tensor model

namespace {

using fsdp2::Add;
using fsdp2::Elements;
using fsdp2::PaddedElements;
using fsdp2::Parts;
using fsdp2::SumKinds;
using fsdp2::Total;

// Model state present at every moment of a steady-state step (optimizer state exists from
// the first step on; gradients are set to None by zero_grad at the start of each step).
void AddState(const Fsdp2Facts& f, bool explain, Parts& parts) {
  const std::int64_t shard = f.BlockShardElements() * f.layers + f.RootShardElements();
  Add(parts, "params", 4 * shard, ComponentKind::kParameters,
      "fp32 parameter shards (FSDP2 DTensor, dim 0 padded to the shard degree)", explain);
  Add(parts, "opt.exp_avg", 4 * shard, ComponentKind::kOptimizer,
      "AdamW first moment (fp32, sharded)", explain);
  Add(parts, "opt.exp_avg_sq", 4 * shard, ComponentKind::kOptimizer,
      "AdamW second moment (fp32, sharded)", explain);
  Add(parts, "buffers", f.rope_buffer_bytes, ComponentKind::kParameters,
      f.qk_norm ? "rope_cache: fp32 RoPE table (max_seq_len, 2 * head_dim), replicated"
                : "freqs_cis: complex64 RoPE table (max_seq_len, head_dim / 2), replicated",
      explain);
  Add(parts, "ws.torch_cublas", f.torch_workspace_bytes, ComponentKind::kParameters,
      "PyTorch cuBLAS workspaces of the forward and autograd threads' GEMMs", explain);
}

std::int64_t GradBytes(const Fsdp2Facts& f) {
  return 4 * (f.BlockShardElements() * f.layers + f.RootShardElements());
}

std::int64_t SavedBlocks(const Fsdp2Facts& f, int count) {
  std::int64_t total = 0;
  for (int l = 0; l < count; ++l) total += f.BlockKeptBytes(l);
  return total;
}

// Blocks left unsharded after forward: torchtitan keeps the last block gathered (it is
// the first one backward needs); reshard_after_forward false keeps them all.
int UnshardedAfterForward(const Fsdp2Facts& f) { return f.reshard_after_forward ? 1 : f.layers; }

// What the loss's backward holds besides the loss's own tensors: model state, the root and
// the last block(s) gathered, every block's saved tensors, the final norm's and output
// layer's inputs.
Parts LossBase(const Fsdp2Facts& f, bool explain) {
  Parts parts;
  AddState(f, explain, parts);
  if (f.microbatches > 1) {
    Add(parts, "grads", GradBytes(f), ComponentKind::kGradients,
        "fp32 gradient shards accumulated by the earlier micro-batches", explain);
  }
  Add(parts, "fsdp.root_unsharded", f.param_bytes * f.RootUnshardedElements(),
      ComponentKind::kTransient,
      "root group (embedding, final norm, output) all-gathered; the root is not resharded after "
      "forward",
      explain);
  Add(parts, "fsdp.blocks_unsharded",
      f.param_bytes * f.BlockUnshardedElements() * UnshardedAfterForward(f),
      ComponentKind::kTransient,
      "blocks still all-gathered after forward (the last one; all without reshard)", explain);
  Add(parts, "act.blocks", SavedBlocks(f, f.layers), ComponentKind::kActivations,
      "tensors every block keeps for backward under its activation checkpointing", explain);
  Add(parts, "act.outside", f.OutsideBytes(), ComponentKind::kActivations,
      "token ids and labels, final-norm saved tensors, output-layer input", explain);
  return parts;
}

const char* LossExplanation(const Fsdp2Facts& f) {
  if (f.compile_loss) {
    return "compiled cross-entropy backward: the saved bf16 logits and per-row fp32 max and "
           "log-sum-exp, "
           "and the bf16 logits gradient its fused kernel writes";
  }
  return f.loss_parallel
             ? "loss_parallel cross-entropy backward: fp32 log-softmax output, zeros_like, exp and "
               "their sum"
             : "cross-entropy backward: fp32 log-softmax output, its gradient and the input "
               "gradient";
}

Parts LossBackward(const Fsdp2Facts& f, bool explain) {
  Parts parts = LossBase(f, explain);
  Add(parts, "act.logits", f.LossBackwardPeakBytes(), ComponentKind::kLogits, LossExplanation(f),
      explain);
  return parts;
}

// What every moment inside the block backward holds: model state, the root gathered until
// its post-backward, the output and final-norm weight gradients waiting for the root's
// reduce-scatter, and the batch's token ids and labels.
Parts BackwardBase(const Fsdp2Facts& f, bool explain) {
  Parts parts;
  AddState(f, explain, parts);
  Add(parts, "fsdp.root_unsharded", f.param_bytes * f.RootUnshardedElements(),
      ComponentKind::kTransient, "root group all-gathered until the root's post-backward", explain);
  Add(parts, "grads.root_unsharded", f.param_bytes * f.HeadElements(), ComponentKind::kTransient,
      "output and final-norm weight gradients, reduce-scattered with the root at the end of "
      "backward",
      explain);
  Add(parts, "act.tokens", 16 * f.tokens, ComponentKind::kActivations, "token ids and labels",
      explain);
  return parts;
}

// What changes with the block index during the backward of block `l`: gradient shards of
// the blocks above (all of them after the first micro-batch), blocks gathered (`l` and the
// one prefetched; without reshard after forward all not yet through backward), the kept
// tensors of the blocks below, and the reduce-scatter input of the block above, held.
struct BlockPosition {
  std::int64_t grads = 0, gathered = 0, kept_below = 0, held_input = 0;
  std::int64_t Total() const { return grads + gathered + kept_below + held_input; }
};

BlockPosition AtBlock(const Fsdp2Facts& f, int l, std::int64_t kept_below) {
  BlockPosition p;
  p.grads = f.microbatches > 1 ? GradBytes(f) : 4 * f.BlockShardElements() * (f.layers - 1 - l);
  p.gathered = f.param_bytes * f.BlockUnshardedElements() *
               (f.reshard_after_forward ? (l > 0 ? 2 : 1) : l + 1);
  p.kept_below = kept_below;
  p.held_input = l + 1 < f.layers ? f.reduce_bytes * f.BlockUnshardedElements() : 0;
  return p;
}

void AddPosition(const BlockPosition& p, bool explain, Parts& parts) {
  Add(parts, "grads", p.grads, ComponentKind::kGradients,
      "fp32 gradient shards of the blocks already reduce-scattered", explain);
  Add(parts, "fsdp.blocks_unsharded", p.gathered, ComponentKind::kTransient,
      "blocks all-gathered (this one and the one prefetched; all not yet resharded without "
      "reshard_after_forward)",
      explain);
  Add(parts, "act.blocks", p.kept_below, ComponentKind::kActivations,
      "saved tensors of the blocks whose backward is still to come", explain);
  Add(parts, "fsdp.held_reduce_scatter_input", p.held_input, ComponentKind::kTransient,
      "the previous block's reduce-scatter input (FSDP2 frees it at the next reduce-scatter)",
      explain);
}

// The heaviest block backward: the walked peak of the block's own backward on top of its
// position (both computed per block kind once, positions summed as the loop goes).
Parts HeaviestBlockBackward(const Fsdp2Facts& f, bool explain) {
  const Fsdp2BackwardPeak walks[2] = {WalkBlockBackward(f, false), WalkBlockBackward(f, true)};
  std::int64_t kept_below = 0, best_bytes = -1, best_kept = 0;
  int best = 0;
  for (int l = 0; l < f.layers; ++l) {
    const std::int64_t bytes =
        AtBlock(f, l, kept_below).Total() + walks[f.Checkpointed(l) ? 1 : 0].Total();
    if (bytes > best_bytes) best_bytes = bytes, best = l, best_kept = kept_below;
    kept_below += f.BlockKeptBytes(l);
  }
  Parts parts = BackwardBase(f, explain);
  AddPosition(AtBlock(f, best, best_kept), explain, parts);
  const Fsdp2BackwardPeak& own = walks[f.Checkpointed(best) ? 1 : 0];
  Add(parts, "act.block_backward", own.saved_bytes, ComponentKind::kActivations,
      "the block's saved (or re-created) tensors still live at its backward's peak", explain);
  Add(parts, "tmp.backward", own.temp_bytes, ComponentKind::kTransient,
      "the block's incoming and working gradients and its unsharded weight gradients at that peak",
      explain);
  return parts;
}

// The heaviest block forward (of a later micro-batch, with every gradient shard made): the
// root and the block gathered (all blocks so far without reshard after forward), the kept
// tensors of the blocks before, the block input, and the block's own forward peak (the op
// sequence the trace emits, tensors/fsdp2_forward.h).
Parts HeaviestBlockForward(const Fsdp2Facts& f, bool explain) {
  const std::int64_t block = Elements(f.block_params), root = Elements(f.root_params);
  std::int64_t kept = 0, best_bytes = -1, best_kept = 0, best_peak = 0;
  int best = 0;
  const std::int64_t peaks[2] = {WalkBlockForward(f, false).peak_bytes,
                                 WalkBlockForward(f, true).peak_bytes};
  for (int l = 0; l < f.layers; ++l) {
    const std::int64_t peak = peaks[f.Checkpointed(l) ? 1 : 0];
    const std::int64_t gathered = f.param_bytes * block * (f.reshard_after_forward ? 1 : l + 1);
    const std::int64_t bytes = gathered + kept + peak;
    if (bytes > best_bytes) best_bytes = bytes, best = l, best_kept = kept, best_peak = peak;
    kept += f.BlockKeptBytes(l);
  }
  Parts parts;
  AddState(f, explain, parts);
  if (f.microbatches > 1) {
    Add(parts, "grads", GradBytes(f), ComponentKind::kGradients,
        "fp32 gradient shards accumulated by the earlier micro-batches", explain);
  }
  Add(parts, "fsdp.root_unsharded", f.param_bytes * root, ComponentKind::kTransient,
      "root group (embedding, final norm, output) all-gathered for the step's forward", explain);
  Add(parts, "fsdp.blocks_unsharded",
      f.param_bytes * block * (f.reshard_after_forward ? 1 : best + 1), ComponentKind::kTransient,
      "the block all-gathered (and those before it without reshard after forward)", explain);
  Add(parts, "act.blocks", best_kept, ComponentKind::kActivations,
      "tensors the blocks before keep for backward", explain);
  Add(parts, "act.tokens", 16 * f.tokens, ComponentKind::kActivations, "token ids and labels",
      explain);
  Add(parts, "act.block_input", f.BoundaryBytes(), ComponentKind::kActivations, "the block's input",
      explain);
  Add(parts, "tmp.forward", best_peak, ComponentKind::kTransient,
      "the block's tensors at its forward's peak (saved and working)", explain);
  return parts;
}

// The heaviest block reduce-scatter (at its fp32 input's allocation): the position, the
// block's bf16 weight gradients being copied in, its fp32 input, and its input gradient.
Parts HeaviestReduceScatter(const Fsdp2Facts& f, bool explain) {
  std::int64_t kept_below = 0, best_bytes = -1, best_kept = 0;
  int best = 0;
  for (int l = 0; l < f.layers; ++l) {  // the other terms do not depend on the block
    const std::int64_t bytes = AtBlock(f, l, kept_below).Total();
    if (bytes > best_bytes) best_bytes = bytes, best = l, best_kept = kept_below;
    kept_below += f.BlockKeptBytes(l);
  }
  Parts parts = BackwardBase(f, explain);
  AddPosition(AtBlock(f, best, best_kept), explain, parts);
  const std::int64_t unpadded = Elements(f.block_params);
  Add(parts, "grads.block_unsharded", f.param_bytes * unpadded, ComponentKind::kTransient,
      "the block's unsharded weight gradients, copied into the reduce-scatter input", explain);
  Add(parts, "fsdp.reduce_scatter_input", f.reduce_bytes * f.BlockUnshardedElements(),
      ComponentKind::kTransient,
      "the block's reduce-scatter input (reduce_dtype, padded unsharded size)", explain);
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
  Add(parts, "grads", f.microbatches > 1 ? GradBytes(f) : 4 * f.BlockShardElements() * f.layers,
      ComponentKind::kGradients, "fp32 gradient shards of every block", explain);
  Add(parts, "fsdp.root_unsharded", f.param_bytes * f.RootUnshardedElements(),
      ComponentKind::kTransient, "root group still all-gathered", explain);
  const std::int64_t root_elements = Elements(f.root_params);
  Add(parts, "grads.root_unsharded", f.param_bytes * root_elements, ComponentKind::kTransient,
      "output, final-norm and embedding (dense) weight gradients, copied into the reduce-scatter "
      "input",
      explain);
  Add(parts, "fsdp.reduce_scatter_inputs",
      f.reduce_bytes * (f.RootUnshardedElements() + f.BlockUnshardedElements()),
      ComponentKind::kTransient,
      "reduce-scatter inputs of the root and of block 0 (held until this one)", explain);
  Add(parts, "act.tokens", 16 * f.tokens, ComponentKind::kActivations, "token ids and labels",
      explain);
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

// Pipeline parallelism: every stage walked (fsdp2_pipeline.cc), the highest reported.
Result<Estimate> EstimatePipelinedFsdp2(const model::Job& job, bool explain) {
  Estimate e;
  e.mode = Mode::kAccurate;
  const int pp = job.model.pipeline_model_parallel_size;
  MEMTUNE_TRY(const Fsdp2Facts first, MakeFsdp2Facts(job, 0));
  const int per_rank = first.virtual_stages;
  const std::string schedule(model::NameOf(first.schedule));
  for (int r = 0; r < pp; ++r) {
    std::vector<Fsdp2Facts> local;  // loop placement: stages r, r + pp, ...
    for (int v = 0; v < per_rank; ++v) {
      MEMTUNE_TRY(Fsdp2Facts f, MakeFsdp2Facts(job, r + v * pp));
      local.push_back(std::move(f));
    }
    RankEstimate rank = EstimateFsdp2Rank(local, explain);
    SumKinds(rank);
    if (rank.allocated_bytes > e.peak_allocated_bytes) {
      e.peak_allocated_bytes = rank.allocated_bytes;
      e.peak_pp_rank = r;
    }
    e.ranks.push_back(std::move(rank));
  }
  if (explain) {
    e.assumptions = {
        "torchtitan Llama under FSDP2 with pipeline parallelism (torchtitan v0.2.2): " + schedule +
            " schedule, " + std::to_string(per_rank) +
            " stage(s) per rank placed in a loop, stages split as "
            "generate_llm_fqn_per_model_part (embedding and output count as a layer each)",
        "no reshard after forward or backward under PP; unsharded gradients accumulate "
        "(reduce_dtype) until the reduce after the last micro-batch",
        "foreach AdamW (torchtitan default), gradients set to None at the start of each step",
        "peak of max_allocated; max_reserved comes from replaying the synthesized trace",
    };
  }
  return e;
}

}  // namespace

Result<Estimate> EstimateFsdp2(const model::Job& job, const EstimateOptions& options) {
  if (job.model.pipeline_model_parallel_size > 1)
    return EstimatePipelinedFsdp2(job, options.with_explanations);
  MEMTUNE_TRY(const Fsdp2Facts f, MakeFsdp2Facts(job));
  const bool explain = options.with_explanations;
  std::vector<std::pair<const char*, Parts>> moments;
  moments.emplace_back("forward", HeaviestBlockForward(f, explain));
  moments.emplace_back("loss backward", LossBackward(f, explain));
  moments.emplace_back("backward", HeaviestBlockBackward(f, explain));
  moments.emplace_back("backward", HeaviestReduceScatter(f, explain));
  moments.emplace_back("backward", RootReduceScatter(f, explain));
  moments.emplace_back("optimizer step", OptimizerStep(f, explain));
  std::size_t best = 0;
  RankEstimate rank;
  for (std::size_t i = 0; i < moments.size(); ++i) {
    const std::int64_t total = Total(moments[i].second);
    if (total > Total(moments[best].second)) best = i;
    if (i + 1 < moments.size())
      rank.backward_peak_bytes = std::max(rank.backward_peak_bytes, total);
  }
  rank.step_peak_bytes = Total(moments.back().second);
  rank.pp_rank = 0;
  rank.components = std::move(moments[best].second);
  rank.peak_phase = moments[best].first;
  rank.layers = f.layers;
  rank.in_flight_microbatches = 1;
  SumKinds(rank);
  Estimate e;
  e.mode = Mode::kAccurate;
  e.peak_pp_rank = 0;
  e.peak_allocated_bytes = rank.allocated_bytes;
  e.ranks.push_back(std::move(rank));
  if (explain) {
    e.assumptions = {
        f.compile_loss
            ? "torchtitan Llama under FSDP2 (torchtitan 9dec370; the loss compiled as since "
              "bbb1b616e): eager RMSNorm/RoPE, flash SDPA, fused cross-entropy on the bf16 logits"
            : "torchtitan Llama under FSDP2 (torchtitan 9dec370): eager RMSNorm/RoPE, flash SDPA, "
              "cross-entropy on an fp32 copy of the logits",
        "foreach AdamW (torchtitan default), gradients set to None at the start of each step",
        "peak of max_allocated; max_reserved comes from replaying the synthesized trace",
    };
    if (f.qk_norm) {
      e.assumptions.push_back(
          "qk_layernorm: torchtitan's Qwen3 attention (d880de214): eager q_norm / k_norm over "
          "head_dim (PyTorch's composite rms_norm) and bf16 rotate_half RoPE");
    }
    if (f.compile) {
      e.assumptions.push_back(
          "torch.compile per block: fused RMSNorm, RoPE and SiLU*mul keep no fp32 or "
          "pointwise intermediates; the checkpoint policy decides what is saved");
    }
    if (f.float8) {
      e.assumptions.push_back(
          "float8 linears (torchao) save the same bf16 activations as bf16 linears; fp8 "
          "casts are transient");
    }
  }
  return e;
}

}  // namespace memtune::estimate::internal
