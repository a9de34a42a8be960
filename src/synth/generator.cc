// One rank's allocation events, in Megatron-Core order (docs/synth.md). Sources:
// Megatron-LM d98e8a6 training.py train_step (zero_grad, forward_backward_func,
// optimizer.step), distributed/param_and_grad_buffer.py (params copied into one param and
// one grad buffer per model chunk, the originals freed), optimizer/distrib_optimizer.py
// (fp32 main-param shards at construction; `shard_main_param.grad = shard_model_grad.float()`
// at each step, released by the next zero_grad), torch.optim Adam (exp_avg / exp_avg_sq
// created at the first step), pipeline_parallel/schedules.py (deallocate_output_tensor after
// each send), transformer_layer.py / TE modules (each layer's forward and backward:
// tensors/layer_walk.h).
#include "synth/generator.h"

#include <algorithm>
#include <utility>

#include "memtune/synth/schedule_order.h"

namespace memtune::synth {

using alloc::HandleId;
using namespace tensors;  // NOLINT: the tensor enums

// The shared expert's side stream (shared_experts.py SharedExpertMLP.stream); the layers
// run on the default stream, 0.
constexpr alloc::StreamId kSharedExpertStream = 1;

Generator::Generator(const Plan& plan, int pp_rank, EventSink& sink)
    : plan_(plan),
      rank_(plan.ranks[pp_rank]),
      pp_rank_(pp_rank),
      emit_(sink),
      label_(emit_.label()) {
  recs_.resize(rank_.chunks.size() * static_cast<std::size_t>(plan.num_microbatches));
  carried_.assign(rank_.chunks.size(), {kNone, kNone});
}

HandleId Generator::Alloc(std::int64_t bytes, const char* tensor) {
  return emit_.Alloc(bytes, tensor);
}

void Generator::Free(HandleId h) { emit_.Free(h); }

void Generator::FreeSaved(LayerRec& rec, int slot) {
  if (rec.saved[slot] != kNone && rec.saved[slot] == retain_) {  // carried past backward
    rec.saved[slot] = kNone;
    return;
  }
  Free(rec.saved[slot]);
  rec.saved[slot] = kNone;
}

// The output-layer walk's executor (tensors/layer_walk.h): tensors through the emitter.
struct Generator::TensorExec {
  using Handle = HandleId;
  static constexpr Handle kNone = Emitter::kNone;
  Generator& gen;
  Handle Alloc(std::int64_t bytes, const char* name) { return gen.Alloc(bytes, name); }
  void Free(Handle h) { gen.Free(h); }
};

// The layer walk's executor (tensors/layer_walk.h): tensors through the emitter, saved
// tensors in the layer's record; the selective-recompute replay labelled as such.
struct Generator::LayerExec {
  using Handle = HandleId;
  static constexpr Handle kNone = Emitter::kNone;
  Generator& gen;
  LayerRec& rec;
  Phase phase = Phase::kForward;  // the label's phase outside the replay
  alloc::StreamId stream = 0;
  Handle Alloc(std::int64_t bytes, const char* name) {
    return gen.emit_.Alloc(bytes, name, stream);
  }
  void Free(Handle h) { gen.Free(h); }
  void SideStream(bool on) { stream = on ? kSharedExpertStream : 0; }
  void Hold(int slot, Handle h) { rec.saved[slot] = h; }
  Handle Held(int slot) const { return rec.saved[slot]; }
  void Release(int slot) { gen.FreeSaved(rec, slot); }
  void Recompute(bool on) {
    if (on)
      phase = std::exchange(gen.label_.phase, Phase::kRecompute);
    else
      gen.label_.phase = phase;
  }
};

// The layer's sizes in the current micro-batch: a MoE layer's follow its expert rows under
// routing imbalance (tensors/moe_load.h), the same in its forward and its backward.
const LayerSizes& Generator::SizesOf(const LayerPlan& lp) {
  if (lp.kind_moe == 0 || !plan_.facts.moe_load.active())
    return plan_.sizes[lp.kind_moe][lp.kind_fp8];
  const tensors::MoeLayerSizes& moe = plan_.moe_sizes[lp.kind_fp8];
  scratch_ = moe.At(
      tensors::ExpertRows(plan_.facts.moe_load, moe.balanced_rows, lp.layer, label_.microbatch));
  return scratch_;
}

HandleId Generator::ForwardLayer(LayerRec& rec, const LayerPlan& lp, HandleId input) {
  label_.layer = lp.layer;
  rec.saved.fill(kNone);
  LayerExec x{*this, rec};
  const LayerShape shape{plan_.sp, plan_.local_hidden};
  return LayerForward(SizesOf(lp), shape, lp.keep, input, x);
}

HandleId Generator::BackwardLayer(LayerRec& rec, const LayerPlan& lp, HandleId grad_out) {
  label_.layer = lp.layer;
  LayerExec x{*this, rec};
  const LayerShape shape{plan_.sp, plan_.local_hidden};
  return LayerBackward(SizesOf(lp), shape, grad_out, x);
}

// Full recompute / offload: re-run the forward of the unit whose top layer is `top`.
void Generator::ReplayGroup(ChunkRec& rec, const ChunkPlan& chunk, int top) {
  const int first = chunk.layers[top].group_first;
  const Phase phase = label_.phase;
  label_.phase = Phase::kRecompute;
  HandleId input = rec.layers[first].saved[kLn1Input];
  if (input == kNone) input = Alloc(plan_.local_hidden, "act.ln1_input");  // reloaded
  for (int i = first; i <= top; ++i) {
    LayerPlan lp = chunk.layers[i];
    lp.keep = LayerKeep::kAll;
    input = ForwardLayer(rec.layers[i], lp, input);
  }
  Free(input);  // the recomputed unit output; autograd only needs the graph behind it
  label_.phase = phase;
}

void Generator::ForwardChunk(int c, int mb) {
  const ChunkPlan& chunk = rank_.chunks[c];
  ChunkRec& rec = recs_[c * plan_.num_microbatches + mb];
  const JobFacts& f = plan_.facts;
  label_ = EventLabel{Phase::kForward, label_.iteration, c, mb, -1, ""};
  rec.layers.resize(chunk.layers.size());
  HandleId x;
  if (chunk.has_embedding) {
    rec.tokens = Alloc(f.embedding_per_mb, "act.embedding");  // token ids (+ dropout mask)
    x = Alloc(plan_.local_hidden, "embedding.output");
  } else {
    x = Alloc(plan_.local_hidden, "p2p.recv_activation");
    // set_input_tensor replaces the previous iteration's input, and its gradient goes too.
    for (HandleId& h : carried_[c]) Free(std::exchange(h, kNone));
  }
  for (std::size_t i = 0; i < chunk.layers.size(); ++i)
    x = ForwardLayer(rec.layers[i], chunk.layers[i], x);
  label_.layer = -1;
  if (!chunk.has_output) {
    Free(x);  // sent to the next stage, then deallocate_output_tensor
    return;
  }
  TensorExec e{*this};
  rec.output = OutputForward(f, x, e);  // the final norm keeps x
}

void Generator::BackwardChunk(int c, int mb) {
  const ChunkPlan& chunk = rank_.chunks[c];
  ChunkRec& rec = recs_[c * plan_.num_microbatches + mb];
  label_ = EventLabel{Phase::kBackward, label_.iteration, c, mb, -1, ""};
  if (!dummy_wgrads_made_) {  // TE's cached placeholders, from the rank's first backward on
    dummy_wgrads_made_ = true;
    const tensors::WgradShapes dummies =
        tensors::DummyWgradShapes(plan_.facts.workspaces, rank_.workspaces.wgrad_sources);
    for (int i = 0; i < dummies.count; ++i) Alloc(dummies.shapes[i].Bytes(), "ws.dummy_wgrad");
  }
  // The chunk's last backward of the iteration keeps its received input and that input's
  // gradient (schedules.py backward_step retain_grad; TransformerBlock.input_tensor).
  const bool carry = plan_.pp_size > 1 && !chunk.has_embedding && !chunk.layers.empty() &&
                     mb == plan_.num_microbatches - 1;
  if (carry) retain_ = rec.layers[0].saved[kLn1Input];
  HandleId grad;
  if (chunk.has_output) {
    TensorExec e{*this};
    HandleId deferred = kNone;  // kept for the wgrad after the flush
    const bool defer = mb < plan_.facts.deferred_microbatches;
    grad = OutputBackward(plan_.facts, rec.output, defer, deferred, e);
    if (deferred != kNone) deferred_.push_back(deferred);
  } else {
    grad = Alloc(plan_.local_hidden, "p2p.recv_grad");
  }
  for (int i = static_cast<int>(chunk.layers.size()) - 1; i >= 0 && !emit_.stopped(); --i) {
    const LayerPlan& lp = chunk.layers[i];
    const bool top_of_unit = i + 1 == static_cast<int>(chunk.layers.size()) ||
                             chunk.layers[i + 1].group_first != lp.group_first;
    if (lp.keep != LayerKeep::kAll && top_of_unit) ReplayGroup(rec, chunk, i);
    label_.phase = Phase::kBackward;
    grad = BackwardLayer(rec.layers[i], lp, grad);
  }
  label_.layer = -1;
  if (carry) {
    // (An input the layer did not keep, under full recompute or offloading, is counted anew.)
    const HandleId input =
        retain_ != kNone ? retain_ : Alloc(plan_.local_hidden, "p2p.recv_activation");
    carried_[c] = {input, std::exchange(grad, kNone)};
    retain_ = kNone;
  }
  Free(grad);  // sent to the previous stage, or consumed by the embedding backward
  Free(rec.tokens);
  rec.tokens = kNone;
  rec.output = {kNone, kNone, kNone};
}

void Generator::Startup() {
  label_ = EventLabel{Phase::kStartup, 0, -1, -1, -1, ""};
  std::vector<std::vector<HandleId>> init(rank_.chunks.size());
  if (rank_.opt_layout) {
    // get_model builds every chunk parameter by parameter on the device (TE module
    // reset_parameters: a params_dtype tensor, initialized; with fp8 params quantized into
    // a new fp8 tensor, the params_dtype values kept on the CPU and the device copy freed).
    const int pbytes = plan_.state_rules.pbytes;
    for (std::size_t c = 0; c < rank_.chunks.size(); ++c) {
      label_.chunk = static_cast<int>(c);
      label_.layer = -1;
      for (const tensors::OptLayout::Param& p : rank_.opt_layout->params[c]) {
        if (!p.fp8) {
          init[c].push_back(Alloc(p.elements * pbytes, "param.init"));
          continue;
        }
        const HandleId hp = Alloc(p.elements * pbytes, "param.init_hp");
        init[c].push_back(Alloc(p.elements, "param.init_fp8"));
        Free(hp);
      }
    }
    ForEachUnit([&](std::size_t, const UnitState& u) { Alloc(u.bytes.buffers, "param.buffer"); });
  } else {
    ForEachUnit([&](std::size_t c, const UnitState& u) {  // get_model builds every chunk
      init[c].push_back(Alloc(u.bytes.params_hp, "param.init"));
      init[c].push_back(Alloc(u.bytes.params_fp8, "param.init_fp8"));
      Alloc(u.bytes.buffers, "param.buffer");
    });
  }
  label_.chunk = 0;
  label_.layer = -1;
  // (Created at the first forward or GEMM of their kind; persistent, so allocated here.)
  Alloc(rank_.workspaces.attn_scores, "buf.attn_scores");
  Alloc(rank_.workspaces.output_gather, "buf.output_gather");
  Alloc(rank_.workspaces.te, "ws.te_gemm");
  Alloc(rank_.workspaces.torch, "ws.torch_cublas");
  const tensors::ModelStateRules& g = plan_.state_rules;
  for (std::size_t c = 0; c < rank_.chunks.size(); ++c) {  // one DDP wrapper per chunk
    label_.chunk = static_cast<int>(c);
    label_.layer = -1;
    if (rank_.opt_layout) {
      // param_and_grad_buffer.py: each buffer's param_data (distributed optimizer) and
      // grad_data, buffer by buffer.
      for (const auto& b : rank_.opt_layout->chunks[c]) {
        if (g.dist_opt) {
          Alloc(b.fp8 ? b.numel : b.numel * g.pbytes,
                b.fp8 ? "ddp.param_buffer_fp8" : "ddp.param_buffer");
        }
        Alloc(b.numel * g.gbytes, "ddp.grad_buffer");
      }
      if (!g.dist_opt) {  // the parameters keep their own storage (counted as one buffer)
        std::int64_t hp = 0, fp8 = 0;
        for (const UnitState& u : rank_.chunks[c].units) {
          hp += u.bytes.params_hp;
          fp8 += u.bytes.params_fp8;
        }
        Alloc(hp, "ddp.param_buffer");
        Alloc(fp8, "ddp.param_buffer_fp8");
      }
    } else {
      std::int64_t hp = 0, fp8 = 0, grads = 0;
      for (const UnitState& u : rank_.chunks[c].units) {
        hp += u.bytes.params_hp;
        fp8 += u.bytes.params_fp8;
        grads += u.bytes.grads;
      }
      Alloc(hp, "ddp.param_buffer");
      Alloc(fp8, "ddp.param_buffer_fp8");
      Alloc(grads, "ddp.grad_buffer");
    }
    for (HandleId h : init[c]) Free(h);
  }
  if (rank_.opt_layout) {
    // distrib_optimizer.py _build_model_and_main_param_groups: shard.clone().float() per
    // parameter (the params_dtype clone freed at once; fp32 parameters keep a view).
    label_.layer = -1;
    if (g.master > 0) {
      for (const tensors::OptShard& sh : rank_.opt_layout->shards) {
        label_.chunk = sh.chunk;
        const HandleId clone = Alloc(sh.elements * g.pbytes, "optimizer.main_param_clone");
        Alloc(sh.elements * g.master, "optimizer.main_param");
        Free(clone);
      }
    }
    ForEachUnit([&](std::size_t, const UnitState& u) {
      Alloc(u.bytes.fp8_transpose, "param.fp8_transpose");
    });
    return;
  }
  ForEachUnit([&](std::size_t, const UnitState& u) {
    Alloc(u.bytes.main_params, "optimizer.main_param");
    Alloc(u.bytes.fp8_transpose, "param.fp8_transpose");
  });
}

void Generator::OptimizerStep() {
  label_ = EventLabel{Phase::kOptimizer, label_.iteration, -1, -1, -1, ""};
  if (rank_.opt_layout) {
    // ChainedOptimizer.step: every optimizer's prepare_grads (shard_main_param.grad =
    // shard_grad.float() per parameter), then each one's step; TE FusedAdam creates
    // exp_avg and exp_avg_sq parameter by parameter at the first.
    const tensors::ModelStateRules& g = plan_.state_rules;
    const auto& shards = rank_.opt_layout->shards;
    if (g.gbytes != 4) {
      for (const tensors::OptShard& sh : shards) {
        label_.chunk = sh.chunk;
        step_grads_.push_back(Alloc(sh.elements * 4, "optimizer.fp32_grad"));
      }
    }
    if (label_.iteration == 0) {
      for (const tensors::OptShard& sh : shards) {
        label_.chunk = sh.chunk;
        Alloc(sh.elements * g.m1, "optimizer.exp_avg");
        Alloc(sh.elements * g.m2, "optimizer.exp_avg_sq");
      }
    }
  } else {
    ForEachUnit([&](std::size_t, const UnitState& u) {
      step_grads_.push_back(Alloc(u.bytes.step_transient, "optimizer.fp32_grad"));
    });
    if (label_.iteration == 0) {  // Adam's state is created at the first step
      ForEachUnit([&](std::size_t, const UnitState& u) {
        Alloc(u.bytes.exp_avg, "optimizer.exp_avg");
        Alloc(u.bytes.exp_avg_sq, "optimizer.exp_avg_sq");
      });
    }
  }
  // PyTorch's AdamW temporaries (model_state.h step_workspace): foreach makes the sqrt of
  // every exp_avg_sq (each unit's share); for_loop three of the largest parameter shard.
  std::vector<HandleId> work;
  std::int64_t loop_bytes = 0;
  const bool foreach = plan_.facts.optimizer_impl == model::OptimizerImpl::kForeach;
  const tensors::ModelStateRules& g = plan_.state_rules;
  const bool per_shard = rank_.opt_layout.has_value();
  ForEachUnit([&](std::size_t, const UnitState& u) {
    if (foreach && !per_shard) {
      work.push_back(Alloc(u.bytes.step_workspace, "optimizer.adam_workspace"));
    }
    loop_bytes = std::max(loop_bytes, u.bytes.step_workspace);
  });
  if (foreach && per_shard && g.adam) {  // _foreach_sqrt: one tensor per parameter shard
    label_.layer = -1;
    for (const tensors::OptShard& sh : rank_.opt_layout->shards) {
      label_.chunk = sh.chunk;
      work.push_back(Alloc(sh.elements * g.m2, "optimizer.adam_workspace"));
    }
  }
  if (!foreach) work.push_back(Alloc(loop_bytes, "optimizer.adam_workspace"));
  for (HandleId h : work) Free(h);
  // Then the fp8 parameters are re-quantized from their main shards, all at once, through
  // params_dtype copies (model_state.h fp8_cast_copy).
  std::vector<HandleId> casts;
  if (per_shard) {
    if (g.fp8_cast_copies) {
      label_.layer = -1;
      for (const tensors::OptShard& sh : rank_.opt_layout->shards) {
        label_.chunk = sh.chunk;
        if (sh.fp8) casts.push_back(Alloc(sh.elements * g.pbytes, "optimizer.fp8_cast_copy"));
      }
    }
  } else {
    ForEachUnit([&](std::size_t, const UnitState& u) {
      casts.push_back(Alloc(u.bytes.fp8_cast_copy, "optimizer.fp8_cast_copy"));
    });
  }
  for (HandleId h : casts) Free(h);
}

void Generator::ZeroGrad() {
  label_ = EventLabel{Phase::kZeroGrad, label_.iteration, -1, -1, -1, "optimizer.fp32_grad"};
  for (HandleId h : step_grads_) Free(h);
  step_grads_.clear();
}

TraceSummary Generator::Run() {
  Startup();
  const int chunks = static_cast<int>(rank_.chunks.size());
  const std::vector<PipelineStep> schedule = PipelineSchedule(
      plan_.pp_size, pp_rank_, chunks, plan_.num_microbatches, plan_.group_size, plan_.ep_overlap);
  for (int it = 0; it < plan_.iterations && !emit_.stopped(); ++it) {
    label_.iteration = it;
    ZeroGrad();
    for (const PipelineStep& s : schedule) {
      if (emit_.stopped()) break;
      if (s.forward)
        ForwardChunk(s.chunk, s.microbatch);
      else
        BackwardChunk(s.chunk, s.microbatch);
    }
    for (HandleId h : deferred_) Free(h);  // finish_embedding_wgrad_compute
    deferred_.clear();
    OptimizerStep();
  }
  label_.iteration = plan_.iterations;
  ZeroGrad();
  TraceSummary summary;
  summary.events = emit_.events();
  summary.persistent_bytes = emit_.LiveBytes();
  return summary;
}

}  // namespace memtune::synth
