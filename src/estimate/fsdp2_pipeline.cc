// One pipeline stage of a torchtitan FSDP2 job (docs/estimator.md "FSDP2 with pipeline
// parallelism"): the stage's schedule walked a block at a time, in bytes, over the moments
// where the stage's allocation peaks. Sources: torchtitan v0.2.2 (73a0e6979dd) train.py
// forward_backward_step, distributed/pipeline_parallel.py, models/llama3/infra/
// parallelize.py apply_fsdp (no reshard after forward under PP); torch.distributed.pipelining
// stage.py (fwd_cache keeps each micro-batch's input and output until its backward;
// backward_maybe_with_nosync: no gradient sync and no reshard after backward for every
// micro-batch; perform_reduce_grad once at the end) and schedules.py (Schedule1F1B,
// ScheduleGPipe); FSDP2 _fsdp_param.py to_accumulated_grad_if_needed /
// accumulate_unsharded_grad_if_needed.
#include "fsdp2_pipeline.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "fsdp2_parts.h"
#include "tensors/fsdp2_backward.h"
#include "tensors/fsdp2_forward.h"

namespace memtune::estimate::internal {

using namespace ::memtune::tensors;  // NOLINT(google-build-using-namespace): the tensor model

namespace {

using fsdp2::Add;
using fsdp2::Elements;
using fsdp2::PaddedElements;
using fsdp2::Parts;
using fsdp2::Total;

// The rank's highest moment so far, over all its local stages.
struct RankBest {
  Parts parts;
  const char* phase = "backward";
  std::int64_t total = -1, backward_peak = 0, step_peak = 0;
};

// One local stage's moments: what one micro-batch caches, the accumulators, and each
// moment's parts on top of `external` (the rest of the rank at that moment).
class StageWalk {
 public:
  StageWalk(const Fsdp2Facts& f, bool explain, RankBest& best)
      : f_(f), explain_(explain), best_(best) {
    walks_[0] = WalkBlockBackward(f, false);
    walks_[1] = WalkBlockBackward(f, true);
    forwards_[0] = WalkBlockForward(f, false);
    forwards_[1] = WalkBlockForward(f, true);
    for (int l = 0; l < f.layers; ++l) {
      kept_.push_back(KeptOf(l));
      kept_sum_ += kept_.back();
    }
    block_acc_ = f.accumulate_bytes * Elements(f.block_params);
    root_acc_ = f.accumulate_bytes * Elements(f.root_params);
  }

  void SetExternal(Parts external) { external_ = std::move(external); }
  const Fsdp2Facts& facts() const { return f_; }
  std::int64_t MicrobatchBytes() const { return kept_sum_ + IoBytes() + HeadCached(); }
  std::int64_t StateParams() const {
    return 4 * (f_.BlockShardElements() * f_.layers + f_.RootShardElements()) +
           f_.rope_buffer_bytes;
  }
  std::int64_t StateOptimizer() const {
    return 8 * (f_.BlockShardElements() * f_.layers + f_.RootShardElements());
  }
  std::int64_t GatheredBytes() const {
    return f_.param_bytes * (Elements(f_.block_params) * f_.layers + Elements(f_.root_params));
  }
  std::int64_t AccumulatedBytes() const { return block_acc_ * f_.layers + root_acc_; }
  std::int64_t ShardGradBytes() const {
    return 4 * (f_.BlockShardElements() * f_.layers + f_.RootShardElements());
  }

 private:
  // What block `l` keeps for backward; on a stage fed by the previous one, block 0's
  // checkpoint input is the received tensor, which the stage caches (counted as I/O).
  std::int64_t KeptOf(int l) const {
    std::int64_t kept = f_.BlockKeptBytes(l);
    if (l == 0 && !f_.has_embedding && f_.Checkpointed(0)) kept -= f_.block_input_bytes;
    return kept;
  }
  // The stage's cached input / output and, on the last stage, what the loss keeps.
  std::int64_t IoBytes() const {
    std::int64_t io = 0;
    if (!f_.has_embedding) io += f_.BoundaryBytes();
    if (!f_.has_head) io += f_.BoundaryBytes();
    return io;
  }
  std::int64_t HeadCached() const {
    if (!f_.has_head) return 0;
    const std::int64_t outside = f_.OutsideBytes() - 16 * f_.tokens;  // tokens: the batch's
    const std::int64_t loss = f_.compile_loss ? f_.loss_row_stats_bytes : f_.logits_fp32_bytes;
    return outside + f_.logits_bytes + loss;
  }
  // The stage's model state (the rank's batch, workspaces and other stages are external).
  Parts Base() const {
    Parts parts;
    const std::int64_t shard = f_.BlockShardElements() * f_.layers + f_.RootShardElements();
    Add(parts, "params", 4 * shard, ComponentKind::kParameters,
        "fp32 parameter shards of this stage (FSDP2 DTensor)", explain_);
    Add(parts, "opt.exp_avg", 4 * shard, ComponentKind::kOptimizer,
        "AdamW first moment (fp32, sharded)", explain_);
    Add(parts, "opt.exp_avg_sq", 4 * shard, ComponentKind::kOptimizer,
        "AdamW second moment (fp32, sharded)", explain_);
    Add(parts, "buffers", f_.rope_buffer_bytes, ComponentKind::kParameters,
        "the RoPE table, replicated", explain_);
    return parts;
  }
  void AddGathered(Parts& parts, std::int64_t blocks, bool root) const {
    const std::int64_t elements =
        Elements(f_.block_params) * blocks + (root ? Elements(f_.root_params) : 0);
    Add(parts, "fsdp.stage_unsharded", f_.param_bytes * elements, ComponentKind::kTransient,
        "the stage's parameters all-gathered for the whole step (no reshard after forward "
        "under PP)",
        explain_);
  }
  void AddAccumulated(Parts& parts, std::int64_t bytes) const {
    Add(parts, "grads.accumulated", bytes, ComponentKind::kGradients,
        "unsharded gradient accumulators (reduce_dtype) of the groups through backward: no "
        "gradient sync until the last micro-batch",
        explain_);
  }
  void AddOthers(Parts& parts, int others) const {
    Add(parts, "act.in_flight", others * MicrobatchBytes(), ComponentKind::kActivations,
        "what the stage caches for the other micro-batches in flight (saved tensors, received "
        "input, stage output or logits)",
        explain_);
  }
  void Consider(Parts parts, const char* phase) {
    parts.insert(parts.end(), external_.begin(), external_.end());
    const std::int64_t total = Total(parts);
    if (std::string_view(phase) == "optimizer step") {
      best_.step_peak = std::max(best_.step_peak, total);
    } else {
      best_.backward_peak = std::max(best_.backward_peak, total);
    }
    if (total > best_.total) {
      best_.total = total;
      best_.parts = std::move(parts);
      best_.phase = phase;
    }
  }
  // Accumulators before block `l`'s backward (the blocks above; the head on the last
  // stage) in the step's first backward, all of them after it.
  std::int64_t AccBefore(int l, bool any_backward) const {
    if (any_backward) return block_acc_ * f_.layers + root_acc_;
    return block_acc_ * (f_.layers - 1 - l) + (f_.has_head ? root_acc_ : 0);
  }

 public:
  // The moments inside a forward of this stage, `others` of its micro-batches cached
  // besides it; `first`: the step's first forward, which all-gathers the groups (the flat
  // output and the per-parameter copies both live); each block's own peak on top of what is
  // live before it, and on the last stage the final norm and the loss.
  void Forward(int others, bool first, bool any_backward) {
    const std::int64_t r = f_.tokens / f_.tp, h = f_.hidden;
    const std::int64_t block = f_.param_bytes * Elements(f_.block_params);
    const std::int64_t block_flat = f_.param_bytes * PaddedElements(f_.block_params, f_.shard);
    const std::int64_t root = f_.param_bytes * Elements(f_.root_params);
    const std::int64_t root_flat = f_.param_bytes * PaddedElements(f_.root_params, f_.shard);
    const std::int64_t acc = any_backward ? AccumulatedBytes() : 0;
    const std::int64_t input = f_.has_embedding ? 0 : f_.BoundaryBytes();  // cached
    auto moment = [&](std::int64_t gathered, std::int64_t kept, std::int64_t live,
                      std::int64_t working, const char* why) {
      Parts p = Base();
      Add(p, "fsdp.stage_unsharded", gathered, ComponentKind::kTransient,
          "the stage's parameters all-gathered so far (no reshard after forward under PP)",
          explain_);
      AddAccumulated(p, acc);
      AddOthers(p, others);
      Add(p, "act.blocks", kept, ComponentKind::kActivations,
          "this micro-batch's saved tensors of the blocks before", explain_);
      Add(p, "act.stage_io", input + live, ComponentKind::kActivations,
          "this micro-batch's received input and the activation entering the op", explain_);
      Add(p, "tmp.forward", working, ComponentKind::kTransient, why, explain_);
      Consider(std::move(p), "forward");
    };
    std::int64_t gathered = first ? 0 : GatheredBytes();
    if (first && f_.has_embedding) {
      moment(0, 0, 0, root_flat + root, "the embedding's all-gather output and its copies");
      gathered += root;
    }
    std::int64_t kept = 0;
    for (int l = 0; l < f_.layers; ++l) {
      const std::int64_t x = l == 0 && !f_.has_embedding ? 0 : f_.BoundaryBytes();
      if (first) {
        moment(gathered, kept, x, block_flat + block, "the block's all-gather output and copies");
        gathered += block;
      }
      moment(gathered, kept, x, forwards_[f_.Checkpointed(l) ? 1 : 0].peak_bytes,
             "the block's tensors at its forward's peak (saved and working)");
      kept += kept_[l];
    }
    if (!f_.has_head) return;
    const std::int64_t x = f_.layers == 0 && !f_.has_embedding ? 0 : f_.BoundaryBytes();
    if (first) {
      moment(gathered, kept, x, root_flat + root, "the norm and output's all-gather");
      gathered += root;
    }
    // Final RMSNorm: x.float() (kept), its pow and scaled temporaries.
    moment(gathered, kept, x, 12 * r * h, "the final norm's fp32 copies");
    // The loss on the logits: the output-layer input and norm tensors kept, the logits,
    // their fp32 copy and the log-softmax (loss_parallel: the shifted and exp tensors too).
    const std::int64_t outside = f_.OutsideBytes() - 16 * f_.tokens;
    const std::int64_t e = f_.logits_fp32_bytes;
    const std::int64_t loss = f_.compile_loss    ? f_.logits_bytes + f_.loss_row_stats_bytes
                              : f_.loss_parallel ? f_.logits_bytes + 3 * e
                                                 : f_.logits_bytes + 2 * e;
    moment(gathered, kept + outside, 0, loss, "the logits and the cross-entropy's fp32 tensors");
  }

  // Every moment of a backward of this stage, `others` of its micro-batches cached besides
  // the one running; `any_backward`: an earlier backward made the accumulators.
  void Backward(int others, bool any_backward) {
    const std::int64_t io = IoBytes();
    const bool last = f_.has_head;
    // The logits the stage caches as its output, through the whole backward.
    const std::int64_t logits = last ? f_.logits_bytes : 0;
    if (last) {  // the cross-entropy backward
      Parts p = Base();
      AddGathered(p, f_.layers, true);
      AddAccumulated(p, any_backward ? block_acc_ * f_.layers + root_acc_ : 0);
      AddOthers(p, others);
      Add(p, "act.blocks", kept_sum_, ComponentKind::kActivations,
          "this micro-batch's saved tensors of every block", explain_);
      Add(p, "act.stage_io", io, ComponentKind::kActivations,
          "this micro-batch's received input, cached until its backward", explain_);
      Add(p, "act.outside", f_.OutsideBytes() - 16 * f_.tokens, ComponentKind::kActivations,
          "final-norm saved tensors, output-layer input", explain_);
      Add(p, "act.logits", f_.LossBackwardPeakBytes() + (f_.compile_loss ? 0 : f_.logits_bytes),
          ComponentKind::kLogits,
          "cross-entropy backward's tensors and the bf16 logits the stage caches as its output",
          explain_);
      Consider(std::move(p), "loss backward");
      if (!any_backward && f_.accumulate_bytes != f_.param_bytes) {  // the head's accumulator
        const std::int64_t head = f_.param_bytes * f_.HeadElements();
        Parts q = Base();
        AddGathered(q, f_.layers, true);
        AddOthers(q, others);
        Add(q, "act.blocks", kept_sum_, ComponentKind::kActivations,
            "this micro-batch's saved tensors of every block", explain_);
        Add(q, "act.stage_io", io, ComponentKind::kActivations,
            "this micro-batch's received input, cached until its backward", explain_);
        Add(q, "act.logits", logits, ComponentKind::kLogits,
            "the bf16 logits the stage caches as its output", explain_);
        Add(q, "tmp.backward", f_.BoundaryBytes() + head, ComponentKind::kTransient,
            "the final norm's input gradient and the output / norm weight gradients", explain_);
        AddAccumulated(q, root_acc_);
        Consider(std::move(q), "backward");
      }
    }
    std::int64_t kept_below = kept_sum_;
    for (int l = f_.layers - 1; l >= 0; --l) {
      kept_below -= kept_[l];
      const Fsdp2BackwardPeak& walk = walks_[f_.Checkpointed(l) ? 1 : 0];
      // Block 0's checkpoint input on a fed stage is the cached input, counted in `io`.
      const std::int64_t double_counted =
          l == 0 && !f_.has_embedding && f_.Checkpointed(0) ? f_.block_input_bytes : 0;
      Parts p = Base();
      AddGathered(p, f_.layers, true);
      AddAccumulated(p, AccBefore(l, any_backward));
      AddOthers(p, others);
      Add(p, "act.blocks", kept_below, ComponentKind::kActivations,
          "this micro-batch's saved tensors of the blocks below", explain_);
      Add(p, "act.stage_io", io, ComponentKind::kActivations,
          "this micro-batch's received input and stage output, cached until its backward",
          explain_);
      Add(p, "act.logits", logits, ComponentKind::kLogits,
          "the bf16 logits the stage caches as its output", explain_);
      Add(p, "act.block_backward", walk.saved_bytes - double_counted, ComponentKind::kActivations,
          "the block's saved (or re-created) tensors still live at its backward's peak", explain_);
      Add(p, "tmp.backward", walk.temp_bytes, ComponentKind::kTransient,
          "the block's incoming and working gradients and its unsharded weight gradients",
          explain_);
      Consider(std::move(p), "backward");
      if (any_backward || f_.accumulate_bytes == f_.param_bytes) continue;
      // to_accumulated_grad_if_needed, parameter by parameter: at the last one every
      // accumulator of the block exists and the last bf16 gradient is still live.
      const std::vector<std::int64_t>& grads = walk.weight_grad_bytes;
      if (grads.empty()) continue;
      // Converting gradient i: accumulators 0..i and bf16 gradients i..last live.
      std::int64_t acc = 0, converted = 0, worst = 0, worst_acc = 0;
      std::int64_t bf16_left = 0;
      for (std::int64_t g : grads) bf16_left += g;
      for (std::int64_t g : grads) {
        converted += g / f_.param_bytes * f_.accumulate_bytes;
        if (converted + bf16_left > worst) worst = converted + bf16_left, worst_acc = converted;
        bf16_left -= g;
      }
      acc = worst_acc;
      Parts q = Base();
      AddGathered(q, f_.layers, true);
      AddAccumulated(q, AccBefore(l, false) + acc);
      AddOthers(q, others);
      Add(q, "act.blocks", kept_below, ComponentKind::kActivations,
          "this micro-batch's saved tensors of the blocks below", explain_);
      Add(q, "act.stage_io", io, ComponentKind::kActivations,
          "this micro-batch's received input and stage output", explain_);
      Add(q, "act.logits", logits, ComponentKind::kLogits,
          "the bf16 logits the stage caches as its output", explain_);
      Add(q, "tmp.backward", walk.input_grad_bytes + worst - worst_acc, ComponentKind::kTransient,
          "the block's input gradient and its bf16 weight gradients not yet converted", explain_);
      Consider(std::move(q), "backward");
    }
    if (f_.has_embedding) {  // embedding_dense_backward, then its accumulator
      const std::int64_t emb = f_.param_bytes * f_.root_params.front().Elements();
      Parts p = Base();
      AddGathered(p, f_.layers, true);
      AddAccumulated(p, block_acc_ * f_.layers + (any_backward ? root_acc_ : 0));
      AddOthers(p, others);
      Add(p, "act.stage_io", io, ComponentKind::kActivations,
          "this micro-batch's stage output, cached until its backward", explain_);
      const bool converts = !any_backward && f_.accumulate_bytes != f_.param_bytes;
      const std::int64_t block0_dx = f_.BoundaryBytes();  // block 0's (or the received) dx
      const std::int64_t acc_emb = f_.accumulate_bytes * f_.root_params.front().Elements();
      Add(p, "tmp.backward", emb + std::max(block0_dx, converts ? acc_emb : 0),
          ComponentKind::kTransient,
          converts ? "the embedding's dense bf16 gradient and its accumulator"
                   : "the embedding's dense gradient and block 0's input gradient",
          explain_);
      Consider(std::move(p), "backward");
    }
  }

  // perform_reduce_grad after the stage's last backward: each group's reduce-scatter input
  // (reduce_dtype, padded) while every later group still holds its accumulator and parameters, the
  // previous input held.
  void Reduce() {
    struct Group {
      std::int64_t acc, gathered, padded, shard;
    };
    std::vector<Group> groups;
    auto add = [&](const std::vector<Fsdp2Param>& params) {
      std::int64_t shard = 0;
      for (const auto& p : params) shard += p.ShardElements(f_.shard);
      groups.push_back({f_.accumulate_bytes * Elements(params), f_.param_bytes * Elements(params),
                        PaddedElements(params, f_.shard), shard});
    };
    if (f_.has_embedding) add(f_.root_params);
    for (int l = 0; l < f_.layers; ++l) add(f_.block_params);
    if (f_.has_head) add(f_.root_params);
    std::int64_t acc = 0, gathered = 0, done = 0, held = 0;
    for (const auto& g : groups) acc += g.acc, gathered += g.gathered;
    for (const auto& g : groups) {
      const std::int64_t input = f_.reduce_bytes * g.padded;
      // At the input's allocation; with a reduce_dtype other than fp32 the output's cast
      // to the fp32 parameter dtype comes next (the input still live, the accumulator gone).
      const std::int64_t cast = f_.reduce_bytes != 4 ? f_.reduce_bytes * g.shard + 4 * g.shard : 0;
      const std::int64_t at_input = input + held + acc;
      const std::int64_t at_output =
          input + held + acc - g.acc + (cast > 0 ? cast : f_.reduce_bytes * g.shard);
      Parts p = Base();
      Add(p, "fsdp.stage_unsharded", gathered, ComponentKind::kTransient,
          "the groups not yet resharded", explain_);
      Add(p, "grads", 4 * done, ComponentKind::kGradients,
          "fp32 gradient shards of the groups already reduced", explain_);
      Add(p, "fsdp.reduce_scatter", std::max(at_input, at_output), ComponentKind::kTransient,
          "accumulators still to reduce, this group's reduce-scatter input and the previous "
          "one's (held until this one)",
          explain_);
      Consider(std::move(p), "backward");
      acc -= g.acc;
      gathered -= g.gathered;
      done += g.shard;
      held = input;
    }
  }

  // The stage's optimizer step: its gradient shards and its _foreach_sqrt temporaries.
  void Optimizer() {
    const std::int64_t shard = 4 * (f_.BlockShardElements() * f_.layers + f_.RootShardElements());
    Parts p = Base();
    Add(p, "grads", shard, ComponentKind::kGradients, "fp32 gradient shards", explain_);
    Add(p, "tmp.step", shard, ComponentKind::kTransient,
        "foreach AdamW: _foreach_sqrt(exp_avg_sq), one fp32 tensor per parameter shard", explain_);
    Consider(std::move(p), "optimizer step");
  }

 private:
  const Fsdp2Facts& f_;
  bool explain_;
  Fsdp2BackwardPeak walks_[2];
  Fsdp2ForwardPeak forwards_[2];  // [checkpointed]
  std::vector<std::int64_t> kept_;
  std::int64_t kept_sum_ = 0, block_acc_ = 0, root_acc_ = 0;
  RankBest& best_;
  Parts external_;
};

// What the rank holds besides the stage a moment is on: the batch and workspaces, and each
// other local stage's state, gathered parameters, gradients and cached micro-batches.
struct StageState {
  int cached = 0, forwards = 0, backwards = 0;
  bool reduced = false;
};

Parts External(const std::vector<StageWalk>& walks, const std::vector<StageState>& state,
               std::size_t current, bool optimizer, bool explain) {
  const Fsdp2Facts& f = walks.front().facts();
  Parts parts;
  Add(parts, "ws.torch_cublas", f.torch_workspace_bytes, ComponentKind::kParameters,
      "PyTorch cuBLAS workspaces of the forward and autograd threads' GEMMs", explain);
  Add(parts, "act.tokens", 16 * f.tokens * f.microbatches, ComponentKind::kActivations,
      "the step's token ids and labels, every micro-batch (pp_schedule.step splits them)", explain);
  std::int64_t params = 0, optimizer_state = 0, gathered = 0, grads = 0, act = 0;
  for (std::size_t u = 0; u < walks.size(); ++u) {
    if (u == current) continue;
    const StageWalk& w = walks[u];
    const StageState& s = state[u];
    params += w.StateParams();
    optimizer_state += w.StateOptimizer();
    if (optimizer) {
      grads += w.ShardGradBytes();
      continue;
    }
    if (s.forwards > 0 && !s.reduced) gathered += w.GatheredBytes();
    if (s.reduced) {
      grads += w.ShardGradBytes();
    } else if (s.backwards > 0) {
      grads += w.AccumulatedBytes();
    }
    act += s.cached * w.MicrobatchBytes();
  }
  Add(parts, "other_stages.params", params, ComponentKind::kParameters,
      "the rank's other stages: parameter shards and RoPE tables", explain);
  Add(parts, "other_stages.optimizer", optimizer_state, ComponentKind::kOptimizer,
      "the rank's other stages: AdamW moments", explain);
  Add(parts, "other_stages.unsharded", gathered, ComponentKind::kTransient,
      "the rank's other stages: parameters all-gathered until their reduce", explain);
  Add(parts, "other_stages.grads", grads, ComponentKind::kGradients,
      "the rank's other stages: gradient accumulators, or shards once reduced", explain);
  Add(parts, "other_stages.act", act, ComponentKind::kActivations,
      "the rank's other stages: their cached micro-batches", explain);
  return parts;
}

}  // namespace

RankEstimate EstimateFsdp2Rank(const std::vector<Fsdp2Facts>& stages, bool explain) {
  RankBest best;
  std::vector<StageWalk> walks;
  walks.reserve(stages.size());
  for (const Fsdp2Facts& f : stages) walks.emplace_back(f, explain, best);
  std::vector<StageState> state(stages.size());
  const std::int64_t n = stages.front().microbatches;
  int in_flight = 0, most = 0;
  for (const Fsdp2Facts::Op& op : stages.front().RankOrder()) {
    StageState& s = state[op.local_stage];
    StageWalk& w = walks[op.local_stage];
    if (op.forward) {
      w.SetExternal(External(walks, state, op.local_stage, false, explain));
      w.Forward(s.cached, s.forwards == 0, s.backwards > 0);
      ++s.cached, ++s.forwards;
      most = std::max(most, ++in_flight);
      continue;
    }
    w.SetExternal(External(walks, state, op.local_stage, false, explain));
    w.Backward(s.cached - 1, s.backwards > 0);
    --s.cached, --in_flight;
    if (++s.backwards == n) {
      w.SetExternal(External(walks, state, op.local_stage, false, explain));
      w.Reduce();
      s.reduced = true;
    }
  }
  for (std::size_t v = 0; v < walks.size(); ++v) {
    walks[v].SetExternal(External(walks, state, v, true, explain));
    walks[v].Optimizer();
  }
  RankEstimate rank;
  rank.pp_rank = stages.front().Rank();
  rank.components = std::move(best.parts);
  rank.peak_phase = best.phase;
  rank.backward_peak_bytes = best.backward_peak;
  rank.step_peak_bytes = best.step_peak;
  for (const Fsdp2Facts& f : stages) rank.layers += f.layers;
  rank.in_flight_microbatches = most;
  return rank;
}

}  // namespace memtune::estimate::internal
