// One pipeline rank: model state + the activations its schedule holds at the peak.
#include "rank_components.h"

#include <algorithm>

namespace memtune::estimate::internal {
namespace {

// Activations of one model chunk for one micro-batch, with the full-recompute and CPU
// offloading policy of megatron/core/transformer/transformer_block.py applied.
struct ChunkActivations {
  int count[2][2] = {};             // fully stored layers of each kind, [moe][fp8]
  std::int64_t checkpoint = 0;      // full-recompute checkpoint inputs
  std::int64_t transient = 0;       // largest backward working set (incl. recompute replay)
};

bool IsMoeLayer(const JobFacts& f, int layer) {
  return layer < static_cast<int>(f.params.moe_pattern.size()) && f.params.moe_pattern[layer];
}

int LayerIndex(const model::ModelConfig& m, const ModelChunk& chunk, int i) {
  return i < chunk.num_layers ? chunk.first_layer + i
                              : static_cast<int>(m.num_layers) + i - chunk.num_layers;
}

ChunkActivations ChunkActivation(const model::Job& job, const JobFacts& f, const ModelChunk& chunk) {
  const auto& m = job.model;
  ChunkActivations out;
  const int n = chunk.num_layers + chunk.num_mtp_layers;
  const bool full = m.recompute_granularity == model::RecomputeGranularity::kFull;
  const int per_unit = std::max(1, m.recompute_num_layers.value_or(1));
  const bool offload = m.cpu_offloading && m.cpu_offloading_activations && m.cpu_offloading_num_layers > 0;
  // Layers of each kind in this chunk; the rank multiplies per-kind sums once.
  std::int64_t largest_layer = 0;
  if (f.uniform_kind >= 0 && !full && !offload) {  // hot path: all layers alike
    const int moe = f.uniform_kind / 2, fp8 = f.uniform_kind % 2;
    out.count[moe][fp8] = n;
    out.transient = n > 0 ? f.workspace[moe][fp8] : 0;
    return out;
  }
  for (int i = 0; i < n; ++i) {
    const int layer = LayerIndex(m, chunk, i);
    const int moe = IsMoeLayer(f, layer) ? 1 : 0, fp8 = IsBf16Layer(m, layer) ? 0 : 1;
    // recompute.py: uniform checkpoints groups of N layers (only each group's input is
    // kept); block checkpoints the first N layers of the chunk one by one.
    // cpu_offload.py: the first cpu_offloading_num_layers layers' activations go to host.
    const bool checkpointed = full && (m.recompute_method == model::RecomputeMethod::kUniform || i < per_unit);
    if (checkpointed) {
      const bool group_start = m.recompute_method != model::RecomputeMethod::kUniform || i % per_unit == 0;
      if (group_start) out.checkpoint += f.checkpoint_input;
    } else if (!(offload && i < m.cpu_offloading_num_layers)) {
      ++out.count[moe][fp8];
    }
    largest_layer = std::max(largest_layer, f.layer_total[moe][fp8]);
    out.transient = std::max(out.transient, f.workspace[moe][fp8]);
  }
  if (full) {  // the backward re-materialises one checkpointed unit
    const int replayed = m.recompute_method == model::RecomputeMethod::kUniform ? std::min(per_unit, n) : 1;
    out.transient += replayed * largest_layer;
  } else if (offload) {  // one offloaded layer in flight
    out.transient += largest_layer;
  }
  return out;
}

// Set per rank by EstimateRank: whether components carry their explanation.
struct Pusher {
  RankEstimate& r;
  bool explain;
  void operator()(const char* name, std::int64_t bytes, ComponentKind kind, const char* explanation) const {
    if (bytes == 0) return;
    r.components.emplace_back(name, bytes, kind, false, explain ? explanation : "");
  }
};

void PushModelState(const Pusher& push, const ModelStateBytes& s) {
  push("params", s.params_hp, ComponentKind::kParameters,
       "parameters in params_dtype (embeddings, norms, non-fp8 weights, frozen PEFT base)");
  push("params.fp8", s.params_fp8, ComponentKind::kParameters,
       "fp8 Transformer Engine linear weights (uint8 param buffer, fp8_param_gather)");
  push("params.fp8_t", s.fp8_transpose, ComponentKind::kParameters,
       "fp8 transposed copies (Hopper) or TE's cached fp8 weights when params are not fp8");
  push("buffers", s.buffers, ComponentKind::kParameters, "persistent fp32 buffers (router expert bias)");
  push("grads", s.grads, ComponentKind::kGradients,
       "DDP gradient buffer of requires_grad parameters (fp32 if grad_reduce_in_fp32)");
  push("opt.main", s.main_params, ComponentKind::kOptimizer,
       "fp32 master parameters (sharded by the distributed optimizer)");
  push("opt.exp_avg", s.exp_avg, ComponentKind::kOptimizer, "Adam first moment");
  push("opt.exp_avg_sq", s.exp_avg_sq, ComponentKind::kOptimizer, "Adam second moment");
}

}  // namespace

JobFacts MakeJobFacts(const model::Job& job, const EstimateOptions& options) {
  const auto& m = job.model;
  JobFacts f;
  f.act = MakeActContext(job);
  f.params = MakeParamCatalog(job);
  // Only the layer kinds the job has: MoE layers need experts, bf16 layers of an fp8 job
  // need first_last_layers_bf16 (otherwise every layer uses index fp8 = 1).
  const bool has_moe = m.num_moe_experts.value_or(0) > 0;
  for (int moe = 0; moe < (has_moe ? 2 : 1); ++moe) {
    for (int fp8 = m.first_last_layers_bf16 ? 0 : 1; fp8 < 2; ++fp8) {
      f.layer[moe][fp8] = LayerActivations(f.act, moe == 1, fp8 == 1);
      f.layer_total[moe][fp8] = SumBytes(f.layer[moe][fp8]);
      f.workspace[moe][fp8] = LayerBackwardWorkspace(f.act, moe == 1, fp8 == 1);
    }
  }
  if (!has_moe && !m.first_last_layers_bf16) f.uniform_kind = 1;  // dense, fp8 index 1
  f.checkpoint_input = CheckpointInputBytes(f.act, m.distribute_saved_activations);
  const std::int64_t tokens = f.act.tokens;
  const std::int64_t hid = m.hidden_size / f.act.hid_div;
  // embedding.py: int64 token ids kept by the embedding lookup; dropout mask if any.
  f.embedding_per_mb = tokens * (8 + (m.hidden_dropout > 0 ? hid : 0));
  // gpt_model.py: the final norm keeps its input; the output layer (ColumnParallelLinear)
  // keeps its input for the wgrad (local shard under SP).
  f.output_hidden_per_mb = 2 * f.act.act_bytes * hid * tokens;
  const std::int64_t vocab_per_rank = model::PaddedVocabSize(job) / f.act.tp;
  const std::int64_t logit_sets = 1 + m.mtp_num_layers.value_or(0);
  // MCore tensor_parallel/cross_entropy.py calculate_logits_max() upcasts the logits with
  // .float(), and both the unfused loss and the native fused one
  // (fusions/fused_cross_entropy.py, which calls the same helpers) save the fp32 softmax
  // (exp_logits) for backward. Only TE's loss (cross_entropy_fusion_impl: te,
  // TE cross_entropy.py) keeps the bf16 logits, overwritten in place with the gradient.
  const bool te_loss = m.cross_entropy_loss_fusion && m.cross_entropy_fusion_impl == "te";
  const int kept_bytes = te_loss ? f.act.act_bytes : 4;
  f.logits_per_mb = kept_bytes * vocab_per_rank * tokens * logit_sets;
  f.logits_transient = f.act.act_bytes * vocab_per_rank * tokens;
  f.num_microbatches = options.num_microbatches.value_or(model::NumMicrobatches(job));
  f.num_microbatches = std::max<std::int64_t>(1, f.num_microbatches);
  f.group_size = m.microbatch_group_size_per_vp_stage.value_or(m.pipeline_model_parallel_size);
  f.with_explanations = options.with_explanations;
  return f;
}

RankEstimate EstimateRank(const model::Job& job, const JobFacts& f, const StageLayout& stage,
                          bool fp8_transpose) {
  const auto& m = job.model;
  const int p = m.pipeline_model_parallel_size, chunks = static_cast<int>(stage.chunks.size());
  RankEstimate r;
  r.pp_rank = stage.pp_rank;
  r.layers = stage.NumLayers();
  const RankParams params = CountRankParams(job, f.params, stage, p);
  const ModelStateBytes state = ComputeModelState(job, params, fp8_transpose);
  const auto live = LiveMicrobatchesPerChunk(p, stage.pp_rank, chunks, f.num_microbatches,
                                             f.group_size, m.overlap_moe_expert_parallel_comm);
  ActBytes held{};
  std::int64_t kind_live[2][2] = {};  // layer-micro-batches of each kind held
  std::int64_t embedding = 0, output_hidden = 0, logits = 0, transient = 0, logits_transient = 0;
  for (int c = 0; c < chunks; ++c) {
    r.in_flight_microbatches += live[c];
    if (live[c] == 0) continue;
    const ModelChunk& chunk = stage.chunks[c];
    const ChunkActivations a = ChunkActivation(job, f, chunk);
    for (int k = 0; k < 4; ++k) kind_live[k / 2][k % 2] += std::int64_t{a.count[k / 2][k % 2]} * live[c];
    held[kCheckpointInput] += a.checkpoint * live[c];
    transient = std::max(transient, a.transient);
    if (chunk.has_embedding) embedding += f.embedding_per_mb * live[c];
    if (chunk.has_output) {
      output_hidden += f.output_hidden_per_mb * live[c];
      logits += f.logits_per_mb * live[c];
      logits_transient = f.logits_transient;
    }
  }
  for (int k = 0; k < 4; ++k) {
    const std::int64_t n = kind_live[k / 2][k % 2];
    if (n == 0) continue;
    const ActBytes& layer = f.layer[k / 2][k % 2];
    for (int t = 0; t < kNumActTensors; ++t) held[t] += n * layer[t];
  }
  const std::int64_t model_state = state.Total();
  const std::int64_t activations = SumBytes(held) + embedding + output_hidden + logits;
  const std::int64_t backward_transient = std::max(transient, logits_transient) + state.fsdp_gather;
  r.backward_peak_bytes = model_state + activations + backward_transient;
  r.step_peak_bytes = model_state + state.step_transient;
  r.model_state_bytes = model_state;
  r.expert_bytes = state.expert;
  r.dense_bytes = model_state - state.expert;
  r.components.reserve(8 + kNumActTensors + 8);
  const Pusher push{r, f.with_explanations};
  PushModelState(push, state);
  if (r.backward_peak_bytes >= r.step_peak_bytes) {
    r.peak_phase = "backward";
    r.activation_bytes = activations;
    r.transient_bytes = backward_transient;
    for (int t = 0; t < kNumActTensors; ++t) {
      push(ActTensorName(static_cast<ActTensor>(t)), held[t], ComponentKind::kActivations,
           ActTensorExplanation(static_cast<ActTensor>(t)));
    }
    push("act.embedding", embedding, ComponentKind::kActivations, "token ids (int64) and embedding dropout mask");
    push("act.output", output_hidden, ComponentKind::kActivations, "final-norm input and output-layer input");
    push("act.logits", logits, ComponentKind::kLogits,
         "logits kept for the loss backward (fp32 softmax; bf16 with TE's fused loss)");
    push("tmp.backward", std::max(transient, logits_transient), ComponentKind::kTransient,
         "largest one-layer backward working set (gradients, gathered inputs, recompute replay) or logits gradient");
    push("tmp.fsdp", state.fsdp_gather, ComponentKind::kTransient,
         "Megatron-FSDP unsharded parameters of the current and prefetched layer");
  } else {
    r.peak_phase = "optimizer step";
    r.transient_bytes = state.step_transient;
    push("tmp.step", state.step_transient, ComponentKind::kTransient,
         "fp32 copies of the bf16 gradient shard made by the optimizer step");
  }
  r.allocated_bytes = std::max(r.backward_peak_bytes, r.step_peak_bytes);
  return r;
}

}  // namespace memtune::estimate::internal
