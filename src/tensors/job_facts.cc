// JobFacts: the per-job tensor sizes every rank shares.
#include "tensors/job_facts.h"

#include <algorithm>

#include "memtune/model/versions.h"

namespace memtune::tensors {

JobFacts MakeJobFacts(const model::Job& job, std::optional<std::int64_t> num_microbatches) {
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
      f.workspace[moe][fp8] = LayerBackwardWorkspace(f.act, moe == 1, fp8 == 1, f.layer[moe][fp8]);
      // Fine-grained offloading: the offloaded tensors are held on the host; the layer in
      // backward has them back on the GPU (part of its working set). (Without it
      // OffloadedTensors is all zeros: skipped.)
      if (m.fine_grained_activation_offloading) {
        const ActBytes off = OffloadedTensors(f.act, moe == 1, f.layer[moe][fp8]);
        for (int t = 0; t < kNumActTensors; ++t) f.layer[moe][fp8][t] -= off[t];
        f.workspace[moe][fp8] += SumBytes(off);
      }
      f.layer_total[moe][fp8] = SumBytes(f.layer[moe][fp8]);
      ActTensorList& nonzero = f.layer_tensors[moe][fp8];
      for (int t = 0; t < kNumActTensors; ++t) {
        if (f.layer[moe][fp8][t] != 0) nonzero.index[nonzero.size++] = static_cast<std::int8_t>(t);
      }
    }
  }
  if (!has_moe && !m.first_last_layers_bf16) f.uniform_kind = 1;  // dense, fp8 index 1
  f.keep = MakeKeepRules(m);
  f.plain_layers = f.uniform_kind >= 0 && ReplayedLayers(f.keep, 1) == 0;  // every layer kAll
  f.checkpoint_input = CheckpointInputBytes(f.act, m.distribute_saved_activations);
  const std::int64_t tokens = f.act.tokens;
  const std::int64_t hid = m.hidden_size / f.act.hid_div;
  // embedding.py: int64 token ids kept by the embedding lookup; dropout mask if any.
  f.embedding_per_mb = tokens * (8 + (m.hidden_dropout > 0 ? hid : 0));
  // gpt_model.py: the final norm keeps its input; the output layer (ColumnParallelLinear)
  // keeps its input for the wgrad (local shard under SP).
  f.local_hidden_per_mb = f.act.act_bytes * hid * tokens;
  f.output_hidden_per_mb = 2 * f.local_hidden_per_mb;
  const std::int64_t vocab_per_rank = model::PaddedVocabSize(job) / f.act.tp;
  const std::int64_t logit_sets = 1 + m.mtp_num_layers.value_or(0);
  // MCore tensor_parallel/cross_entropy.py calculate_logits_max() upcasts the logits with
  // .float(), and both the unfused loss and the native fused one
  // (fusions/fused_cross_entropy.py, which calls the same helpers) save the fp32 softmax
  // (exp_logits) for backward. Only TE's loss (cross_entropy_fusion_impl: te,
  // TE cross_entropy.py) keeps the bf16 logits, overwritten in place with the gradient.
  const bool te_loss = m.cross_entropy_loss_fusion &&
                       m.cross_entropy_fusion_impl == model::CrossEntropyFusionImpl::kTe;
  const int kept_bytes = te_loss ? f.act.act_bytes : 4;
  f.logits_per_mb = kept_bytes * vocab_per_rank * tokens * logit_sets;
  // Bridge gemma2_provider.py logit_softcapping: cap * tanh(logits / cap); tanh saves its
  // output (the activation dtype) for backward, one more logits-sized tensor per set.
  if (m.final_logit_softcapping.value_or(0) > 0) {
    f.logits_per_mb += std::int64_t{f.act.act_bytes} * vocab_per_rank * tokens * logit_sets;
  }
  // fusions/fused_cross_entropy.py runs its steps through jit_fuser (torch.compile, jit.py):
  // the in-place updates of its inputs (the fp32 logits in forward, the saved softmax in
  // backward) become a computed fp32 buffer copied back, so the native fused loss holds one
  // more fp32 logits-sized tensor next to the bf16 logits / their gradient. Measured on the
  // Megatron-LM CI runs with --cross-entropy-loss-fusion (docs/validation.md).
  const bool compiled_loss = m.cross_entropy_loss_fusion &&
                             m.cross_entropy_fusion_impl == model::CrossEntropyFusionImpl::kNative;
  f.logits_transient = (f.act.act_bytes + (compiled_loss ? 4 : 0)) * vocab_per_rank * tokens;
  // tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication.backward
  // without gradient_accumulation_fusion: grad_weight = grad_output.t().matmul(total_input),
  // [vocab / TP, hidden] in the activation dtype, returned as the weight's gradient and
  // dropped by the DDP hook. It is made after the loss backward freed the kept logits,
  // next to the logits gradient and the output layer's input gradient.
  // With gradient_accumulation_fusion before Megatron-Core 0.14 / TE 2.3 the placeholder
  // it returns instead is a new tensor of that shape too (model/versions.h).
  const bool wgrad_tensor = !m.gradient_accumulation_fusion || !model::McoreCachesOutputWgrad(job);
  if (wgrad_tensor && !job.peft) {
    f.output_wgrad = std::int64_t{f.act.act_bytes} * vocab_per_rank * m.hidden_size;
    f.output_backward_extra =
        std::max<std::int64_t>(0, f.local_hidden_per_mb + f.output_wgrad - f.logits_per_mb);
  }
  f.optimizer_impl = job.memtune.optimizer_implementation;
  f.num_microbatches = num_microbatches.value_or(model::NumMicrobatches(job));
  f.num_microbatches = std::max<std::int64_t>(1, f.num_microbatches);
  // tensor_parallel/layers.py: with defer_embedding_wgrad_compute the output layer appends
  // its input (forward) and its output gradient (backward) to buffers for the first
  // wgrad_deferral_limit micro-batches (all when 0); finish_embedding_wgrad_compute
  // (schedules.py) consumes them after the pipeline flush.
  if (m.defer_embedding_wgrad_compute && m.pipeline_model_parallel_size > 1) {
    f.deferred_microbatches =
        m.wgrad_deferral_limit == 0
            ? f.num_microbatches
            : std::min<std::int64_t>(m.wgrad_deferral_limit, f.num_microbatches);
    f.deferred_wgrad_per_mb = f.act.act_bytes * (vocab_per_rank + hid) * tokens;
  }
  f.group_size = m.microbatch_group_size_per_vp_stage.value_or(m.pipeline_model_parallel_size);
  f.workspaces = MakeWorkspaceRules(job, f.act, f.params);
  f.moe_load = MakeMoeLoadModel(job);
  const bool keeps_all =
      !f.keep.full && f.keep.offloaded == 0 && !m.fine_grained_activation_offloading;
  bool dense = !has_moe || m.mtp_num_layers.value_or(0) > 0, moe = false;
  for (bool is_moe : f.params.moe_pattern) (is_moe ? moe : dense) = true;
  if (static_cast<std::int64_t>(f.params.moe_pattern.size()) < m.num_layers) dense = true;
  const bool mixed =
      (dense && moe) || (m.first_last_layers_bf16 && m.fp8 != model::Fp8Format::kNone);
  f.walk_schedule = keeps_all && (f.moe_load.active() || mixed);
  return f;
}

}  // namespace memtune::tensors
