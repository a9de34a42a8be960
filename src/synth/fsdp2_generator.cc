// One torchtitan FSDP2 rank's allocation events (docs/synth.md "FSDP2"). Sources:
// torchtitan 9dec370 train.py (zero_grad, forward, loss_fn on pred.float(), `del pred`,
// backward, clip_grad_norm_, optimizer step), parallelize_llama.py (fully_shard per block,
// the last block and the root not resharded after forward), PyTorch 2.6 FSDP2
// (_fsdp_collectives.py foreach_all_gather: the all-gather output on the copy-in stream,
// copied out into per-parameter unsharded tensors; foreach_reduce: the reduce-scatter input
// on the compute stream, kept until the next reduce-scatter, the output on the
// reduce-scatter stream becoming the sharded gradient), torch.optim AdamW foreach
// (exp_avg / exp_avg_sq at the first step, _foreach_sqrt temporaries).
#include "synth/fsdp2_generator.h"

#include <algorithm>
#include <string_view>

namespace memtune::synth {

using est_f = tensors::Fsdp2Facts;
using tensors::Fsdp2Ac;

Fsdp2Generator::Fsdp2Generator(const est_f& facts, int iterations, EventSink& sink)
    : f_(facts),
      iterations_(iterations),
      own_emitter_(std::make_unique<Emitter>(sink)),
      emit_(*own_emitter_),
      label_(emit_.label()) {
  SizeState();
}

Fsdp2Generator::Fsdp2Generator(const est_f& facts, int iterations, Emitter& shared)
    : f_(facts), iterations_(iterations), emit_(shared), label_(emit_.label()) {
  SizeState();
}

void Fsdp2Generator::SizeState() {
  shards_.resize(f_.layers + 1);
  unsharded_.resize(f_.layers + 1);
  gathered_.assign(f_.layers + 1, false);
  block_saved_.resize(f_.layers);
  accumulated_.resize(f_.layers + 1);
}

alloc::HandleId Fsdp2Generator::Embed() {
  const std::int64_t n = f_.tokens, r = f_.tokens / f_.tp, h = f_.hidden;
  Unshard(kRoot);
  if (f_.tp == 1) return Alloc(2 * n * h, "act.block_input");
  HandleId partial = Alloc(2 * n * h, "fwd.embedding_partial");
  HandleId x = Alloc(2 * r * h, "act.block_input");
  Free(partial);
  return x;
}

void Fsdp2Generator::NormForOutput(HandleId x, std::vector<Named>& kept) {
  Unshard(kRoot);
  HandleId y = FinalNorm(kept);
  Free(x);
  if (f_.tp > 1) {  // output ColwiseParallel: Shard(1) input all-gathered to Replicate
    HandleId gathered = Alloc(2 * f_.tokens * f_.hidden, "output.gemm_input");
    Free(y);
    y = gathered;
  }
  kept.push_back({"output.gemm_input", y});
}

alloc::HandleId Fsdp2Generator::Alloc(std::int64_t bytes, const char* tensor,
                                      alloc::StreamId stream) {
  return emit_.Alloc(bytes, tensor, stream);
}

void Fsdp2Generator::Free(HandleId& h) {
  emit_.Free(h);
  h = kNone;
}

void Fsdp2Generator::FreeAll(std::vector<HandleId>& handles) {
  for (auto& h : handles) Free(h);
  handles.clear();
}

const std::vector<tensors::Fsdp2Param>& Fsdp2Generator::Params(int group) const {
  return group == kRoot ? f_.root_params : f_.block_params;
}

std::vector<alloc::HandleId>& Fsdp2Generator::Unsharded(int group) { return unsharded_[group + 1]; }

void Fsdp2Generator::Startup() {
  label_ = EventLabel{Phase::kStartup, 0, -1, -1, -1, ""};
  // model.to_empty(device) after fully_shard: every parameter's padded fp32 shard.
  for (int g = kRoot; g < f_.layers; ++g) {
    label_.layer = g;
    for (const auto& p : Params(g))
      shards_[g + 1].push_back(Alloc(4 * p.ShardElements(f_.shard), "param_shard"));
  }
  label_.layer = -1;
  // The RoPE buffer (Llama freqs_cis, Qwen3 rope_cache); init_weights recomputes it.
  const char* buffer = f_.qk_norm ? "rope_cache" : "freqs_cis";
  HandleId first = Alloc(f_.rope_buffer_bytes, buffer);
  persistent_freqs_ = Alloc(f_.rope_buffer_bytes, buffer);
  Free(first);
  // (Created at the first forward and backward GEMMs; persistent, so allocated here.)
  if (f_.LocalStage() == 0) Alloc(f_.torch_workspace_bytes, "ws.torch_cublas");  // per process
}

// FSDPParamGroup.unshard + wait_for_unshard: the flat all-gather output (padded unsharded
// size) on the copy-in stream, split-copied into per-parameter tensors, then released.
void Fsdp2Generator::Unshard(int group) {
  if (gathered_[group + 1]) return;
  std::int64_t flat = 0;
  for (const auto& p : Params(group)) flat += p.ShardElements(f_.shard) * f_.shard;
  HandleId out = Alloc(f_.param_bytes * flat, "fsdp.all_gather_output", kAllGather);
  for (const auto& p : Params(group)) {
    Unsharded(group).push_back(Alloc(f_.param_bytes * p.Elements(), "fsdp.unsharded_param"));
  }
  Free(out);
  gathered_[group + 1] = true;
}

void Fsdp2Generator::Reshard(int group) {
  FreeAll(Unsharded(group));
  gathered_[group + 1] = false;
}

// foreach_reduce: reduce_dtype input of the padded unsharded size (compute stream), the
// unsharded gradients released, the output shard (reduce-scatter stream) kept as the
// gradient; the previous group's input is released now (FSDP2 holds it one step).
void Fsdp2Generator::ReduceScatter(int group, std::vector<HandleId>& unsharded_grads,
                                   bool accumulate) {
  std::int64_t shard = 0;
  for (const auto& p : Params(group)) shard += p.ShardElements(f_.shard);
  HandleId input = Alloc(f_.reduce_bytes * shard * f_.shard, "fsdp.reduce_scatter_input");
  FreeAll(unsharded_grads);
  HandleId output = Alloc(f_.reduce_bytes * shard, "grad_shard", kReduceScatter);
  if (f_.reduce_bytes != 4) {  // cast to the fp32 parameter dtype
    HandleId cast = Alloc(4 * shard, "grad_shard", kReduceScatter);
    Free(output);
    output = cast;
  }
  if (accumulate) {
    Free(output);  // sharded_param.grad += new gradient
  } else {
    grads_.push_back(output);
  }
  Free(pending_rs_input_);
  pending_rs_input_ = input;
}

void Fsdp2Generator::Forward(int microbatch) {
  label_ = EventLabel{Phase::kForward, label_.iteration, -1, microbatch, -1, ""};
  HandleId x = Embed();
  for (int l = 0; l < f_.layers && !emit_.stopped(); ++l) {
    label_.layer = l;
    Unshard(l);
    std::vector<Named> kept;
    HandleId out = BlockForward(l, /*recompute=*/false, kept);
    if (f_.Checkpointed(l)) {
      kept.push_back({"act.block_input", x});  // the checkpoint keeps its input
    } else {
      Free(x);  // only x.float() is saved (RMSNorm)
    }
    block_saved_[l] = std::move(kept);
    if (f_.reshard_after_forward && l + 1 < f_.layers) Reshard(l);
    x = out;
  }
  label_.layer = -1;
  outside_.clear();
  NormForOutput(x, outside_);
  Loss();
}

// loss_fn = cross_entropy(pred.flatten(0, 1).float(), labels); then `del pred`. Compiled
// (compile_loss), AOTAutograd saves the bf16 logits and per-row max and log-sum-exp.
alloc::HandleId Fsdp2Generator::Loss(bool keep_logits) {
  const std::int64_t e = f_.logits_fp32_bytes;
  HandleId logits = Alloc(f_.logits_bytes, "logits");
  if (f_.compile_loss) {  // the compiled graph saves the bf16 logits and two fp32 row statistics
    const HandleId stats = Alloc(f_.loss_row_stats_bytes, "loss.row_stats");
    if (keep_logits) {  // the stage's cached output holds the logits past the loss backward
      loss_saved_ = {stats};
      return logits;
    }
    loss_saved_ = {logits, stats};
    return kNone;
  }
  HandleId upcast = Alloc(e, "loss.logits_fp32");
  HandleId logsoftmax;
  if (f_.loss_parallel) {  // loss.py _log_softmax: shifted, exp(shifted), result
    HandleId shifted = Alloc(e, "loss.shifted");
    HandleId exp = Alloc(e, "loss.exp");
    Free(exp);
    logsoftmax = Alloc(e, "loss.log_softmax");
    Free(shifted);
  } else {
    logsoftmax = Alloc(e, "loss.log_softmax");
  }
  Free(upcast);
  loss_saved_ = {logsoftmax};
  if (keep_logits) return logits;
  Free(logits);
  return kNone;
}

alloc::HandleId Fsdp2Generator::LossBackward() {
  const std::int64_t e = f_.logits_fp32_bytes;
  HandleId grad16;
  if (f_.compile_loss) {  // one fused kernel: softmax - one_hot, scaled, cast to bf16
    grad16 = Alloc(f_.logits_bytes, "bwd.logits_grad");
    FreeAll(loss_saved_);
  } else {
    HandleId grad32;
    if (f_.loss_parallel) {  // _nll_loss_and_log_softmax_backward: (zeros + exp(x)) * grad
      HandleId zeros = Alloc(e, "bwd.loss_zeros");
      HandleId exp = Alloc(e, "bwd.loss_exp");
      HandleId sum = Alloc(e, "bwd.loss_sum");
      Free(exp);
      grad32 = Alloc(e, "bwd.loss_grad");
      Free(zeros);
      Free(sum);
    } else {  // nll_loss_backward, then _log_softmax_backward_data
      HandleId nll = Alloc(e, "bwd.nll_grad");
      grad32 = Alloc(e, "bwd.log_softmax_grad");
      Free(nll);
    }
    FreeAll(loss_saved_);
    grad16 = Alloc(f_.logits_bytes, "bwd.logits_grad");  // ToCopyBackward
    Free(grad32);
  }
  const std::int64_t n = f_.tokens, r = f_.tokens / f_.tp, h = f_.hidden;
  HandleId dx = Alloc(2 * n * h, "bwd.output_dgrad");
  root_head_grads_ = Alloc(f_.param_bytes * f_.HeadElements(), "grad.output");
  Free(grad16);
  for (auto& t : outside_) {
    if (std::string_view(t.name) == "output.gemm_input") Free(t.handle);
  }
  if (f_.tp > 1) {
    HandleId scattered = Alloc(2 * r * h, "bwd.output_dgrad_rs");
    Free(dx);
    dx = scattered;
  }
  HandleId dnorm = NormBackward(/*fused=*/false);
  for (auto& t : outside_) Free(t.handle);
  outside_.clear();
  Free(dx);
  return dnorm;
}

void Fsdp2Generator::Backward(int microbatch) {
  label_ = EventLabel{Phase::kBackward, label_.iteration, -1, microbatch, -1, ""};
  HandleId grad = LossBackward();
  const bool accumulate = microbatch > 0;
  for (int l = f_.layers - 1; l >= 0 && !emit_.stopped(); --l) {
    label_.layer = l;
    label_.phase = Phase::kBackward;
    Unshard(l);
    if (l > 0) Unshard(l - 1);  // backward prefetch of the next block's all-gather
    std::vector<Named>& saved = block_saved_[l];
    if (f_.Checkpointed(l)) {
      label_.phase = Phase::kRecompute;  // the checkpoint input is in `saved`
      HandleId out = BlockForward(l, /*recompute=*/true, saved);
      Free(out);
      label_.phase = Phase::kBackward;
    }
    std::vector<HandleId> weight_grads;
    grad = BlockBackward(grad, saved, weight_grads);
    ReduceScatter(l, weight_grads, accumulate);
    Reshard(l);
  }
  label_.layer = -1;
  // embedding_dense_backward: a dense gradient of the (vocab-sharded) table.
  std::vector<HandleId> root_grads{root_head_grads_};
  root_head_grads_ = kNone;
  root_grads.push_back(
      Alloc(f_.param_bytes * f_.root_params.front().Elements(), "grad.tok_embeddings"));
  Free(grad);
  ReduceScatter(kRoot, root_grads, accumulate);
  Reshard(kRoot);
  Free(pending_rs_input_);
}

void Fsdp2Generator::OptimizerStep(int iteration) {
  label_ = EventLabel{Phase::kOptimizer, iteration, -1, -1, -1, ""};
  // model.parameters() order: embedding, blocks, norm, output (a pipeline stage: its own).
  std::vector<std::int64_t> shard_bytes;
  const bool embedding = f_.has_embedding && !f_.root_params.empty();
  if (embedding) shard_bytes.push_back(4 * f_.root_params.front().ShardElements(f_.shard));
  for (int l = 0; l < f_.layers; ++l) {
    for (const auto& p : f_.block_params) shard_bytes.push_back(4 * p.ShardElements(f_.shard));
  }
  for (std::size_t i = embedding ? 1 : 0; i < f_.root_params.size(); ++i) {
    shard_bytes.push_back(4 * f_.root_params[i].ShardElements(f_.shard));
  }
  if (exp_avg_.empty()) {  // torch.optim.AdamW _init_group: zeros_like per parameter
    for (std::int64_t b : shard_bytes) {
      exp_avg_.push_back(Alloc(b, "opt.exp_avg"));
      exp_avg_sq_.push_back(Alloc(b, "opt.exp_avg_sq"));
    }
  }
  std::vector<HandleId> sqrt;  // _multi_tensor_adamw: exp_avg_sq_sqrt = _foreach_sqrt(...)
  for (std::int64_t b : shard_bytes) sqrt.push_back(Alloc(b, "opt.sqrt_tmp"));
  FreeAll(sqrt);
}

TraceSummary Fsdp2Generator::Run() {
  Startup();
  for (int it = 0; it < iterations_ && !emit_.stopped(); ++it) {
    label_ = EventLabel{Phase::kZeroGrad, it, -1, -1, -1, ""};
    FreeAll(grads_);  // optimizers.zero_grad(): set_to_none
    HandleId tokens = Alloc(8 * f_.tokens, "tokens");
    HandleId labels = Alloc(8 * f_.tokens, "labels");
    Free(tokens_);
    Free(labels_);
    tokens_ = tokens;
    labels_ = labels;
    for (std::int64_t mb = 0; mb < f_.microbatches && !emit_.stopped(); ++mb) {
      Forward(static_cast<int>(mb));
      Backward(static_cast<int>(mb));
    }
    OptimizerStep(it);
  }
  return TraceSummary{emit_.events(), emit_.LiveBytes()};
}

}  // namespace memtune::synth

namespace memtune::synth {

// torchtitan v0.2.2 train.py forward_backward_step under PP: the local batch (every
// micro-batch's input ids and labels) is on the device of every stage; pp_schedule.step
// splits it and runs the stage's schedule; PyTorch's pipelining then reduces the
// accumulated gradients once (perform_reduce_grad); then the optimizer steps.
TraceSummary Fsdp2Generator::RunRank(const std::vector<const est_f*>& stages, int iterations,
                                     EventSink& sink) {
  Emitter emit(sink);
  std::vector<std::unique_ptr<Fsdp2Generator>> gens;
  for (const est_f* f : stages) {
    gens.push_back(std::unique_ptr<Fsdp2Generator>(new Fsdp2Generator(*f, iterations, emit)));
  }
  for (auto& g : gens) g->Startup();
  const std::vector<est_f::Op> order = stages.front()->RankOrder();
  const std::int64_t n = stages.front()->microbatches;
  for (int it = 0; it < iterations && !emit.stopped(); ++it) {
    for (auto& g : gens) g->ZeroGradAndBatch(it);
    std::vector<std::int64_t> backwards(gens.size(), 0);
    for (const est_f::Op& op : order) {
      if (emit.stopped()) break;
      Fsdp2Generator& g = *gens[op.local_stage];
      if (op.forward) {
        g.StageForward(op.microbatch);
        continue;
      }
      g.StageBackward(op.microbatch);
      if (++backwards[op.local_stage] == n) {  // REDUCE_GRAD after the stage's last backward
        g.label_ = EventLabel{Phase::kBackward, it, -1, -1, -1, ""};
        g.ReduceAccumulated();
      }
    }
    for (auto& g : gens) g->OptimizerStep(it);  // one optimizer per model part, in order
  }
  return TraceSummary{emit.events(), emit.LiveBytes()};
}

// The step's start on one local stage: zero_grad frees its gradient shards; the rank's
// first stage puts the whole local batch (input ids and labels, every micro-batch) on the
// device (torchtitan v0.2.2 train.py forward_backward_step; pp_schedule.step splits it).
void Fsdp2Generator::ZeroGradAndBatch(int iteration) {
  label_ = EventLabel{Phase::kZeroGrad, iteration, -1, -1, -1, ""};
  FreeAll(grads_);
  if (f_.LocalStage() == 0) {
    HandleId tokens = Alloc(8 * f_.tokens * f_.microbatches, "tokens");
    HandleId labels = Alloc(8 * f_.tokens * f_.microbatches, "labels");
    Free(tokens_);
    Free(labels_);
    tokens_ = tokens;
    labels_ = labels;
  }
  stage_mb_.assign(f_.microbatches, StageMicrobatch{});
}

// Stage.forward_one_chunk: the received input (or the embedding of the token ids), the
// stage's blocks, and on the last stage the final norm, output layer and loss. Every
// block stays gathered (no reshard after forward under PP); fwd_cache keeps the input and
// output until the micro-batch's backward.
void Fsdp2Generator::StageForward(int microbatch) {
  label_ = EventLabel{Phase::kForward, label_.iteration, -1, microbatch, -1, ""};
  StageMicrobatch& s = stage_mb_[microbatch];
  s.block_saved.assign(f_.layers, {});
  HandleId x = f_.has_embedding ? Embed() : (s.input = Alloc(f_.BoundaryBytes(), "pp.recv_input"));
  for (int l = 0; l < f_.layers && !emit_.stopped(); ++l) {
    label_.layer = f_.first_layer + l;
    Unshard(l);
    std::vector<Named> kept;
    HandleId out = BlockForward(l, /*recompute=*/false, kept);
    if (f_.Checkpointed(l)) {  // torchtitan counts a stage's own blocks
      // The checkpoint keeps its input; the stage input is fwd_cache's, not the block's.
      if (x != s.input) kept.push_back({"act.block_input", x});
    } else if (x != s.input) {
      Free(x);
    }
    s.block_saved[l] = std::move(kept);
    x = out;
  }
  label_.layer = -1;
  if (!f_.has_head) {
    s.output = x;  // sent to the next stage, kept for this micro-batch's backward
    return;
  }
  // A stage without blocks: its input stays cached, the norm does not free it.
  NormForOutput(x != s.input ? x : kNone, s.outside);
  s.output = Loss(/*keep_logits=*/true);  // the stage output: the logits
  s.loss_saved = std::move(loss_saved_);
  loss_saved_.clear();
}

// Stage.backward_one_chunk: the loss backward on the last stage (else the received output
// gradient), the blocks in reverse, each group's gradients accumulated; the input
// gradient is sent (or, on stage 0, becomes the embedding's gradient); the cached input
// and output are dropped at the end.
void Fsdp2Generator::StageBackward(int microbatch) {
  label_ = EventLabel{Phase::kBackward, label_.iteration, -1, microbatch, -1, ""};
  StageMicrobatch& s = stage_mb_[microbatch];
  HandleId grad;
  if (f_.has_head) {
    outside_ = std::move(s.outside);
    loss_saved_ = std::move(s.loss_saved);
    grad = LossBackward();
    std::vector<HandleId> head{root_head_grads_};
    root_head_grads_ = kNone;
    Accumulate(kRoot, head);  // [norm, output]'s post-backward, after the norm's backward
  } else {
    grad = Alloc(f_.BoundaryBytes(), "pp.recv_output_grad");
  }
  for (int l = f_.layers - 1; l >= 0 && !emit_.stopped(); --l) {
    label_.layer = f_.first_layer + l;
    label_.phase = Phase::kBackward;
    std::vector<Named>& saved = s.block_saved[l];
    if (f_.Checkpointed(l)) {
      label_.phase = Phase::kRecompute;
      HandleId out = BlockForward(l, /*recompute=*/true, saved);
      Free(out);
      label_.phase = Phase::kBackward;
    }
    std::vector<HandleId> weight_grads;
    grad = BlockBackward(grad, saved, weight_grads);
    Accumulate(l, weight_grads);
  }
  label_.layer = -1;
  if (f_.has_embedding) {
    std::vector<HandleId> embedding{
        Alloc(f_.param_bytes * f_.root_params.front().Elements(), "grad.tok_embeddings")};
    Free(grad);
    Accumulate(kRoot, embedding);
  } else {
    Free(grad);  // sent to the previous stage
    Free(s.input);
  }
  Free(s.output);
}

void Fsdp2Generator::Accumulate(int group, std::vector<HandleId>& unsharded_grads) {
  std::vector<HandleId>& acc = accumulated_[group + 1];
  if (!acc.empty()) {  // accumulate_unsharded_grad_if_needed: added in place, .grad freed
    FreeAll(unsharded_grads);
    return;
  }
  if (f_.accumulate_bytes == f_.param_bytes) {  // the gradient stays in .grad
    acc = std::move(unsharded_grads);
    unsharded_grads.clear();
    return;
  }
  // to_accumulated_grad_if_needed, parameter by parameter: .to(reduce_dtype), .grad = None.
  for (HandleId& g : unsharded_grads) {
    const std::int64_t elements = emit_.Bytes(g) / f_.param_bytes;
    acc.push_back(Alloc(f_.accumulate_bytes * elements, "fsdp.accumulated_grad"));
    Free(g);
  }
  unsharded_grads.clear();
}

void Fsdp2Generator::ReduceAccumulated() {
  auto reduce = [&](int group) {
    if (accumulated_[group + 1].empty()) return;
    ReduceScatter(group, accumulated_[group + 1], /*accumulate=*/false);
    Reshard(group);
  };
  if (f_.has_embedding) reduce(kRoot);
  for (int l = 0; l < f_.layers && !emit_.stopped(); ++l) reduce(l);
  if (f_.has_head) reduce(kRoot);
  Free(pending_rs_input_);  // the root's post-backward final callback
}

}  // namespace memtune::synth
