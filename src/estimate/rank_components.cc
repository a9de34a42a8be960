// One pipeline rank: model state + the activations its schedule holds at the peak.
#include "rank_components.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rank_walk.h"
#include "schedule_internal.h"
#include "tensors/layer_plan.h"
#include "tensors/workspaces.h"

namespace memtune::estimate::internal {

using namespace ::memtune::tensors;  // NOLINT(google-build-using-namespace): the tensor model

namespace {

// Activations of one model chunk for one micro-batch, with the full-recompute and CPU
// offloading policy (tensors/layer_plan.h) applied.
struct ChunkActivations {
  int count[2][2] = {};         // fully stored layers of each kind, [moe][fp8]
  std::int64_t checkpoint = 0;  // full-recompute checkpoint inputs
  std::int64_t transient = 0;   // largest backward working set (incl. recompute replay)
};

// (Out of line, so that EstimateRank's plain-layers hot path stays as small as it was.)
[[gnu::noinline]] ChunkActivations ChunkActivation(const model::ModelConfig& m, const JobFacts& f,
                                                   const ModelChunk& chunk) {
  ChunkActivations out;
  const int n = chunk.num_layers + chunk.num_mtp_layers;
  // Layers of each kind in this chunk; the rank multiplies per-kind sums once. (Jobs with
  // JobFacts::plain_layers do not come here: EstimateRank counts their layers itself.)
  std::int64_t largest_layer = 0;
  for (int i = 0; i < n; ++i) {
    const LayerPlan lp = PlanLayer(m, f.keep, f.params.moe_pattern, chunk, i);
    if (lp.keep == LayerKeep::kAll) ++out.count[lp.kind_moe][lp.kind_fp8];
    if (lp.keep == LayerKeep::kCheckpointInput) out.checkpoint += f.checkpoint_input;
    largest_layer = std::max(largest_layer, f.layer_total[lp.kind_moe][lp.kind_fp8]);
    out.transient = std::max(out.transient, f.workspace[lp.kind_moe][lp.kind_fp8]);
  }
  // The backward re-materialises one checkpointed unit, or has one offloaded layer back.
  out.transient += ReplayedLayers(f.keep, n) * largest_layer;
  return out;
}

// Appends a rank's nonzero components to its vector, which the caller reserves for all of
// them (one allocation). Names are views of literals or of activations.h's table, so no
// name is copied; explanations are copied only with EstimateOptions::with_explanations.
class ComponentWriter {
 public:
  ComponentWriter(RankEstimate& r, bool explain) : components_(r.components), explain_(explain) {}
  void operator()(std::string_view name, std::int64_t bytes, ComponentKind kind,
                  std::string_view explanation) {
    if (bytes == 0) return;
    Component& c = components_.emplace_back();
    c.name = name;
    c.bytes = bytes;
    c.kind = kind;
    if (explain_) Explain(c, explanation);
  }

 private:
  // Only explained estimates copy explanations: out of line, so that the numbers-only path
  // stays small. Sized once (assigning into the empty string would grow it).
  [[gnu::noinline]] static void Explain(Component& c, std::string_view explanation) {
    c.explanation = std::string(explanation);
  }
  std::vector<Component>& components_;
  bool explain_;
};

// PushModelState's components, at most; the backward peak adds at most one per activation
// tensor and 6 others, the optimizer-step peak 3.
constexpr int kModelStateComponents = 13;
constexpr int kBackwardOtherComponents = 7, kStepComponents = 3;

void PushModelState(ComponentWriter& push, const ModelStateBytes& s) {
  push("params", s.params_hp, ComponentKind::kParameters,
       "parameters in params_dtype (embeddings, norms, non-fp8 weights, frozen PEFT base)");
  push("params.fp8", s.params_fp8, ComponentKind::kParameters,
       "fp8 Transformer Engine linear weights (uint8 param buffer, fp8_param_gather)");
  push("params.fp8_t", s.fp8_transpose, ComponentKind::kParameters,
       "fp8 transposed copies (Hopper) or TE's cached fp8 weights when params are not fp8");
  push("buffers", s.buffers, ComponentKind::kParameters,
       "persistent fp32 buffers (router expert bias)");
  push("buf.attn_scores", s.attn_score_buffer, ComponentKind::kParameters,
       "MCore local attention's persistent global buffer the scores GEMM is handed (one "
       "[b, heads, s, s] tensor per rank)");
  push("buf.output_gather", s.output_gather_buffer, ComponentKind::kParameters,
       "MCore's global memory buffer the output layer all-gathers its sequence-parallel input "
       "into (one [s, b, h] tensor, kept; shared with local attention's score buffer)");
  push("ws.te_gemm", s.te_workspace, ComponentKind::kParameters,
       "Transformer Engine cuBLAS workspaces (general; userbuffers; grouped expert GEMMs)");
  push("ws.torch_cublas", s.torch_workspace, ComponentKind::kParameters,
       "PyTorch cuBLAS workspaces of the forward and autograd threads' torch GEMMs");
  push("ws.dummy_wgrad", s.dummy_wgrad, ComponentKind::kParameters,
       "Transformer Engine's cached weight-gradient placeholders (one per local weight shape, "
       "from the first backward; gradient_accumulation_fusion)");
  push("grads", s.grads, ComponentKind::kGradients,
       "DDP gradient buffer of requires_grad parameters (fp32 if grad_reduce_in_fp32)");
  push("opt.main", s.main_params, ComponentKind::kOptimizer,
       "fp32 master parameters (sharded by the distributed optimizer)");
  push("opt.exp_avg", s.exp_avg, ComponentKind::kOptimizer, "Adam first moment");
  push("opt.exp_avg_sq", s.exp_avg_sq, ComponentKind::kOptimizer, "Adam second moment");
}

}  // namespace

void EstimateRank(const model::Job& job, const JobFacts& f, int pp_rank,
                  std::span<const ModelChunk> stage, const ModelStateRules& state_rules,
                  bool with_explanations, const LayerPasses* passes, RankEstimate& r) {
  const auto& m = job.model;
  const int p = m.pipeline_model_parallel_size, chunks = static_cast<int>(stage.size());
  r.pp_rank = pp_rank;
  r.layers = NumLayers(stage);
  const RankParams params = CountRankParams(job, f.params, stage, p);
  ModelStateBytes state =
      f.params.param_layout
          ? ComputeModelState(
                state_rules, params,
                LayoutRank(job, f.params.layout, f.params.moe_pattern, stage, pp_rank, false))
          : ComputeModelState(state_rules, params);
  const RankWorkspaces ws = ComputeRankWorkspaces(f.workspaces, stage, f.params.moe_pattern);
  state.te_workspace = ws.te;
  state.torch_workspace = ws.torch;
  state.dummy_wgrad = ws.dummy_wgrad;
  state.attn_score_buffer = ws.attn_scores;
  state.output_gather_buffer = ws.output_gather;
  std::array<int, 32> live_inline;  // chunks per rank: VPP, rarely above 32
  std::vector<int> live_heap;
  std::span<int> live(live_inline.data(), std::min<std::size_t>(chunks, live_inline.size()));
  if (chunks > static_cast<int>(live_inline.size())) {
    live_heap.resize(chunks);
    live = live_heap;
  }
  FillLiveMicrobatches(p, pp_rank, f.num_microbatches, f.group_size,
                       m.overlap_moe_expert_parallel_comm, live);
  std::int64_t kind_live[2][2] = {};  // layer-micro-batches of each kind held
  std::int64_t checkpoint = 0;        // full-recompute checkpoint inputs held
  std::int64_t embedding = 0, output_hidden = 0, logits = 0, transient = 0, logits_transient = 0;
  std::int64_t deferred = 0;  // output-layer wgrad inputs held for the flush
  const int uniform_moe = f.uniform_kind / 2, uniform_fp8 = f.uniform_kind % 2;  // plain_layers
  for (int c = 0; c < chunks; ++c) {
    const int n_live = live[c];
    r.in_flight_microbatches += n_live;
    if (n_live == 0) continue;
    const ModelChunk& chunk = stage[c];
    if (f.plain_layers) {  // hot path: every layer of the chunk stored, all of one kind
      const int n = chunk.num_layers + chunk.num_mtp_layers;
      kind_live[uniform_moe][uniform_fp8] += std::int64_t{n} * n_live;
      if (n > 0) transient = std::max(transient, f.workspace[uniform_moe][uniform_fp8]);
    } else {
      const ChunkActivations a = ChunkActivation(m, f, chunk);
      for (int moe = 0; moe < 2; ++moe) {
        for (int fp8 = 0; fp8 < 2; ++fp8) {
          kind_live[moe][fp8] += std::int64_t{a.count[moe][fp8]} * n_live;
        }
      }
      checkpoint += a.checkpoint * n_live;
      transient = std::max(transient, a.transient);
    }
    if (chunk.has_embedding) embedding += f.embedding_per_mb * n_live;
    if (chunk.has_output) {
      output_hidden += f.output_hidden_per_mb * n_live;
      logits += f.logits_per_mb * n_live;
      logits_transient = f.logits_transient + f.output_backward_extra;
      // At the last deferred micro-batch's backward, the earlier ones are held (its own
      // gradient is the logits transient).
      deferred =
          std::min(f.deferred_microbatches, f.num_microbatches - 1) * f.deferred_wgrad_per_mb;
    }
  }
  // The held tensors are sum over kinds of (layer-micro-batches x the kind's per-layer
  // bytes); their total is the same sum over the kinds' per-layer totals.
  std::int64_t kind_n[4];         // layer-micro-batches of each kind held, nonzero ones
  const ActBytes* kind_layer[4];  // that kind's per-layer bytes
  const ActTensorList* kind_tensors = nullptr;  // the first kind's nonzero tensors
  int num_kinds = 0;
  std::int64_t layers_total = checkpoint;
  for (int moe = 0; moe < 2; ++moe) {
    for (int fp8 = 0; fp8 < 2; ++fp8) {
      const std::int64_t n = kind_live[moe][fp8];
      if (n == 0) continue;
      if (num_kinds == 0) kind_tensors = &f.layer_tensors[moe][fp8];
      kind_n[num_kinds] = n;
      kind_layer[num_kinds++] = &f.layer[moe][fp8];
      layers_total += n * f.layer_total[moe][fp8];
    }
  }
  // Layers whose sizes differ by micro-batch (routing imbalance) or by kind: the schedule
  // walked replaces the closed form (rank_walk.h, JobFacts::walk_schedule).
  std::optional<ActivationPeak> walked;
  if (f.walk_schedule) {
    walked = WalkRankActivations(job, f, *passes, stage, pp_rank);
    r.in_flight_microbatches = walked->in_flight;
    layers_total = SumBytes(walked->held);
    embedding = walked->embedding;
    output_hidden = walked->output;
    logits = walked->logits;
    deferred = walked->deferred + walked->carried;
    transient = walked->transient;
    logits_transient = 0;
  }
  const std::int64_t model_state = state.Total();
  const std::int64_t activations = layers_total + embedding + output_hidden + logits + deferred;
  const std::int64_t backward_transient = std::max(transient, logits_transient) + state.fsdp_gather;
  r.backward_peak_bytes = model_state + activations + backward_transient;
  // schedules.py backward_step retains the grad of each received input, and the chunk's
  // TransformerBlock.set_input_tensor keeps the last one until the next forward: one input
  // and its gradient per chunk that receives from the previous stage (not the embedding's).
  if (p > 1) {
    int fed = 0;
    for (const ModelChunk& chunk : stage) fed += !chunk.has_embedding && chunk.num_layers > 0;
    r.carried_bytes = 2 * std::int64_t{fed} * f.local_hidden_per_mb;
  }
  // Adam's temporaries go before the fp8 re-quantization's copies are made.
  r.step_peak_bytes = model_state + r.carried_bytes + state.step_transient +
                      std::max(state.step_workspace, state.fp8_cast_copy);
  r.model_state_bytes = model_state;
  r.expert_bytes = state.expert;
  r.dense_bytes = model_state - state.expert;
  const bool backward_peak = r.backward_peak_bytes >= r.step_peak_bytes;
  const bool one_kind = num_kinds == 1 && checkpoint == 0 && !walked;  // the kind's nonzero ones
  const int tensors = one_kind ? kind_tensors->size : kNumActTensors;
  r.components.reserve(kModelStateComponents +
                       (backward_peak ? tensors + kBackwardOtherComponents : kStepComponents));
  ComponentWriter push(r, with_explanations);
  PushModelState(push, state);
  if (backward_peak) {
    r.peak_phase = "backward";
    r.activation_bytes = activations;
    r.transient_bytes = backward_transient;
    auto push_tensor = [&](int t, std::int64_t held) {
      if (held == 0) return;  // (push skips zeros; this skips the name look-up too)
      const ActTensorText& text = ActTensorTextOf(static_cast<ActTensor>(t));
      push(text.name, held, ComponentKind::kActivations, text.explanation);
    };
    if (one_kind) {  // hot path
      for (int i = 0; i < kind_tensors->size; ++i) {
        const int t = kind_tensors->index[i];
        push_tensor(t, kind_n[0] * (*kind_layer[0])[t]);
      }
    } else {
      for (int t = 0; t < kNumActTensors; ++t) {
        std::int64_t held = t == kCheckpointInput ? checkpoint : 0;
        if (walked) {
          held = walked->held[t];
        } else {
          for (int i = 0; i < num_kinds; ++i) held += kind_n[i] * (*kind_layer[i])[t];
        }
        push_tensor(t, held);
      }
    }
    push("act.embedding", embedding, ComponentKind::kActivations,
         "token ids (int64) and embedding dropout mask");
    push("act.output", output_hidden, ComponentKind::kActivations,
         "final-norm input and output-layer input");
    push("act.logits", logits, ComponentKind::kLogits,
         "logits kept for the loss backward (fp32 softmax; bf16 with TE's fused loss)");
    push("act.deferred_wgrad", walked ? walked->deferred : deferred, ComponentKind::kActivations,
         "defer_embedding_wgrad_compute: output-layer inputs and logits gradients kept for the "
         "wgrad after the pipeline flush");
    push("act.pipeline_carry", walked ? walked->carried : 0, ComponentKind::kActivations,
         "each model chunk's last received pipeline input and its retained gradient, kept "
         "until the chunk's next forward (TransformerBlock.input_tensor)");
    push("tmp.backward", std::max(transient, logits_transient), ComponentKind::kTransient,
         walked ? "the working set of the pass running at the activation peak (a layer's or the "
                  "output layer's tensors made in its forward or backward)"
                : "largest one-layer backward working set (gradients, gathered inputs, recompute "
                  "replay) or logits gradient");
    push("tmp.fsdp", state.fsdp_gather, ComponentKind::kTransient,
         "Megatron-FSDP unsharded parameters of the current and prefetched layer");
  } else {
    r.peak_phase = "optimizer step";
    const bool workspace_peak = state.step_workspace > state.fp8_cast_copy;
    r.transient_bytes = state.step_transient + std::max(state.step_workspace, state.fp8_cast_copy);
    r.activation_bytes = r.carried_bytes;
    push("act.pipeline_carry", r.carried_bytes, ComponentKind::kActivations,
         "each model chunk's last received pipeline input and its retained gradient, kept "
         "until the chunk's next forward (TransformerBlock.input_tensor)");
    push("tmp.step", state.step_transient, ComponentKind::kTransient,
         "fp32 copies of the bf16 gradient shard made by the optimizer step");
    push("tmp.adam", workspace_peak ? state.step_workspace : 0, ComponentKind::kTransient,
         "PyTorch AdamW's temporaries (memtune.optimizer_implementation foreach: the sqrt of "
         "every exp_avg_sq; for_loop: three of the largest parameter shard)");
    push("tmp.fp8_cast", workspace_peak ? 0 : state.fp8_cast_copy, ComponentKind::kTransient,
         "bf16 copies of the fp8 parameters' main shards, made to re-quantize them after the step");
  }
  r.allocated_bytes = std::max(r.backward_peak_bytes, r.step_peak_bytes);
}

}  // namespace memtune::estimate::internal
