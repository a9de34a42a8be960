// One Megatron-Core transformer layer's forward and backward, and the output layer's, tensor
// by tensor, in the order MCore and Transformer Engine create and free them (memtune_tensors
// internal API). Written
// once and run by an executor, as fsdp2_backward.h is for FSDP2 blocks: the trace generator
// emits every step (src/synth/generator.cc); WalkLayerBackwardPeak (below) walks it in bytes
// for the layer's backward peak, which tests hold equal to the estimator's closed form
// (SumBytes(LayerActivations) + LayerBackwardWorkspace). Sources: transformer_layer.py
// (layer order), attention.py, TE linear / layernorm_linear / layernorm_mlp modules,
// tensor_parallel/mappings.py (sequence-parallel gathers and reduce-scatters).
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include "tensors/activations.h"
#include "tensors/job_facts.h"
#include "tensors/layer_plan.h"
#include "tensors/layer_tensors.h"

namespace memtune::tensors {

// The tensors of one layer kind ([moe][fp8]), per micro-batch on one rank.
struct LayerSizes {
  ActBytes kept{};     // saved for backward (recompute applied): LayerActivations
  ActBytes dropped{};  // created in forward, dropped by selective recompute
  FwdBytes fwd{};
  BwdBytes bwd{};
  AttnBwdBytes attn_bwd{};
  ActBytes offloaded{};  // fine-grained offloading: held on the host between passes
  std::int64_t q_bytes = 0, k_bytes = 0;  // the q and k parts of act.attn_qkv (0: one piece)
  // MoE layers with moe_shared_expert_overlap: the shared expert's tensors are made on its
  // side stream (MCore shared_experts.py SharedExpertMLP.stream, one for the process).
  bool shared_side_stream = false;
};

LayerSizes MakeLayerSizes(const ActContext& ctx, bool moe_layer, bool fp8_layer);

// What every layer of a job shares besides its sizes.
struct LayerShape {
  bool sp = false;  // sequence parallelism: row-parallel GEMM outputs reduce-scattered
  std::int64_t local_hidden = 0;  // bytes of one micro-batch's hidden states (local tokens)
};

// The slots a layer's saved tensors are held in: the ActTensor indices, then act.attn_q and
// act.attn_k when LayerSizes::q_bytes splits them out of act.attn_qkv.
inline constexpr int kSlotQ = kNumActTensors, kSlotK = kNumActTensors + 1;
inline constexpr int kLayerSlots = kNumActTensors + 2;

// `Exec` provides, for the one layer it walks:
//   using Handle = ...; static constexpr Handle kNone;
//   Handle Alloc(std::int64_t bytes, const char* name): a new tensor (names: static storage);
//   void Free(Handle h): frees a tensor (kNone: no-op);
//   void Hold(int slot, Handle h): the layer keeps h in saved slot `slot`;
//   Handle Held(int slot): what the slot holds (kNone: nothing);
//   void Release(int slot): frees what the slot holds (kNone: no-op) and empties it;
//   void Recompute(bool on): the allocations from on to off re-create forward tensors;
// and optionally
//   void SideStream(bool on): the allocations from on to off are made on the shared
//   expert's side stream (executors without it ignore streams).

// Switches the executor's allocation stream, when it keeps streams.
template <class Exec>
void SideStream(Exec& x, bool on) {
  if constexpr (requires { x.SideStream(on); }) x.SideStream(on);
}

// Allocates the part of tensor `t` the layer keeps into its slot(s).
template <class Exec>
void HoldSaved(const LayerSizes& z, int t, Exec& x) {
  const char* name = ActTensorName(static_cast<ActTensor>(t));
  if (t == kAttnQkv && z.q_bytes > 0) {
    // attention.py: the linear_qkv output (v is a view of it), then q and k after RoPE.
    x.Hold(t, x.Alloc(z.kept[t] - z.q_bytes - z.k_bytes, name));
    x.Hold(kSlotQ, x.Alloc(z.q_bytes, "act.attn_q"));
    x.Hold(kSlotK, x.Alloc(z.k_bytes, "act.attn_k"));
  } else {
    x.Hold(t, x.Alloc(z.kept[t], name));
  }
}

// The layer's forward from `input` (held as act.ln1_input); returns its output (the next
// layer's input). Every tensor but the kept ones is freed by the end; with `keep` other
// than kAll the kept ones go too (all but the input for a checkpoint), and fine-grained
// offloading's tensors leave the device.
template <class Exec>
typename Exec::Handle LayerForward(const LayerSizes& z, const LayerShape& s, LayerKeep keep,
                                   typename Exec::Handle input, Exec& x) {
  using Handle = typename Exec::Handle;
  x.Hold(kLn1Input, input);
  std::array<Handle, kNumActTensors> dropped;
  int num_dropped = 0;
  auto save = [&](int t) {
    HoldSaved(z, t, x);
    if (z.dropped[t] > 0)
      dropped[num_dropped++] = x.Alloc(z.dropped[t], ActTensorName(static_cast<ActTensor>(t)));
  };
  auto fwd = [&](FwdTransient t) { return x.Alloc(z.fwd[t], FwdTransientName(t)); };
  save(kLn1Output);
  const Handle g1 = fwd(kFwdLn1Gather);
  save(kAttnMlaLatent);
  save(kAttnQkv);
  save(kAttnQkNormInput);
  x.Free(g1);
  // Unfused attention: the scores GEMM, then the softmax (and dropout) outputs it keeps.
  const Handle score_in = fwd(kFwdAttnScoreInput);
  const Handle scores = fwd(kFwdAttnScores);
  x.Free(score_in);
  save(kAttnProbs);
  save(kAttnProbsDropout);
  x.Free(scores);
  save(kAttnOut);
  save(kAttnSoftmaxStats);
  // Row-parallel output: with SP the GEMM output is freed once reduce-scattered; without,
  // it is all-reduced in place and feeds the residual add directly.
  const Handle cast = fwd(kFwdProjInCast);
  Handle proj = fwd(kFwdProjOut);
  x.Free(cast);
  const Handle proj_rs = fwd(kFwdProjScatter);
  if (s.sp) x.Free(std::exchange(proj, Exec::kNone));
  save(kAttnDropoutMask);
  save(kPostNormInput);
  save(kLn2Input);
  x.Free(proj);
  x.Free(proj_rs);
  save(kLn2Output);
  const Handle g2 = fwd(kFwdLn2Gather);
  save(kMoeRouter);
  save(kMoePermuteMap);
  const Handle dispatch = fwd(kFwdMoeDispatch);
  save(kMoeDispatch);
  x.Free(dispatch);
  for (int t : {kMlpFc1Out, kMoeFc1Out, kMlpActParts, kMoeActParts}) save(t);
  x.Free(g2);
  const Handle act = fwd(kFwdActOut);
  save(kMlpFc2In);
  save(kMoeFc2In);
  x.Free(act);
  // shared_experts.py with the overlap: pre_forward_comm (the gate, the gathered input),
  // linear_fc1_forward_and_act, linear_fc2_forward, post_forward_comm and get_output all
  // run under torch.cuda.stream(self.stream).
  if (z.shared_side_stream) SideStream(x, true);
  save(kSharedFc1Out);
  save(kSharedFc2In);
  save(kSharedGateOut);
  save(kSharedFc1Input);
  if (z.shared_side_stream) SideStream(x, false);
  save(kMoeLoraInput);
  save(kMoeLoraHidden);
  const Handle combine = fwd(kFwdMoeCombine);
  save(kMoeCombine);
  x.Free(combine);
  Handle fc2 = fwd(kFwdFc2Out);
  const Handle fc2_rs = fwd(kFwdFc2Scatter);
  if (s.sp) x.Free(std::exchange(fc2, Exec::kNone));
  save(kMlpDropoutMask);
  save(kLoraInput);
  save(kLoraHidden);
  save(kDoraScaled);
  // The residual add: the layer output, the next layer's input (act.ln1_input).
  const Handle output = x.Alloc(s.local_hidden, "act.layer_output");
  x.Free(fc2);
  x.Free(fc2_rs);
  for (int i = 0; i < num_dropped; ++i) x.Free(dropped[i]);
  if (keep == LayerKeep::kAll) {
    // Fine-grained offloading: the offloaded tensors' device copies go once copied out.
    for (int t = 0; t < kNumActTensors; ++t) {
      if (z.offloaded[t] == 0) continue;
      x.Release(t);
      if (t == kAttnQkv) {
        x.Release(kSlotQ);
        x.Release(kSlotK);
      }
    }
  } else {
    const int first = keep == LayerKeep::kCheckpointInput ? kLn1Output : kLn1Input;
    for (int slot = first; slot < kLayerSlots; ++slot) x.Release(slot);
  }
  return output;
}

// The layer's backward from the gradient of its output, `grad_out` (freed once used), with
// every saved tensor in place (a replayed unit re-ran LayerForward first); returns the
// gradient of its input. Each saved tensor is released after its last use; the selective-
// recompute replay and the MLP backward's working set (LayerBackwardWorkspace) come first.
template <class Exec>
typename Exec::Handle LayerBackward(const LayerSizes& z, const LayerShape& s,
                                    typename Exec::Handle grad_out, Exec& x) {
  using Handle = typename Exec::Handle;
  std::array<Handle, kNumActTensors> replay;
  replay.fill(Exec::kNone);
  x.Recompute(true);
  for (int t = 0; t < kNumActTensors; ++t) {
    if (z.dropped[t] > 0)
      replay[t] = x.Alloc(z.dropped[t], ActTensorName(static_cast<ActTensor>(t)));
  }
  x.Recompute(false);
  // Fine-grained offloading: reloaded for this layer's backward.
  for (int t = 0; t < kNumActTensors; ++t) {
    if (z.offloaded[t] > 0 && x.Held(t) == Exec::kNone) HoldSaved(z, t, x);
  }
  // MLP backward: its whole working set is live at once (LayerBackwardWorkspace).
  std::array<Handle, kNumBwdTransients> w;
  w.fill(Exec::kNone);
  for (int t = kBwdGradGather; t < kNumBwdTransients; ++t) {
    w[t] = x.Alloc(z.bwd[t], BwdTransientName(static_cast<BwdTransient>(t)));
  }
  for (int t = kBwdGradGather; t < kBwdFc1Dgrad; ++t) x.Free(w[t]);
  for (int slot :
       {kLn2Output, kMlpFc1Out, kMlpActParts, kMlpFc2In, kMlpDropoutMask, kMoeRouter, kMoeDispatch,
        kMoeFc1Out, kMoeActParts, kMoeFc2In, kMoeCombine, kSharedFc1Out, kSharedFc2In,
        kSharedGateOut, kSharedFc1Input, kMoePermuteMap, kMoeLoraInput, kMoeLoraHidden}) {
    x.Release(slot);
  }
  // As in forward: with SP the dgrad output is reduce-scattered and freed; without, it is
  // all-reduced in place and read by the norm backward.
  const Handle mlp_rs = x.Alloc(s.sp ? s.local_hidden : 0, "bwd.fc1_dgrad_scatter");
  if (s.sp) x.Free(std::exchange(w[kBwdFc1Dgrad], Exec::kNone));
  const Handle mid =
      x.Alloc(s.local_hidden, "bwd.grad_residual");  // pre-MLP norm backward + residual
  x.Free(w[kBwdFc1Dgrad]);
  x.Free(mlp_rs);
  x.Release(kLn2Input);
  x.Free(grad_out);
  // Attention backward.
  auto attn = [&](AttnBwdTransient t) { return x.Alloc(z.attn_bwd[t], AttnBwdTransientName(t)); };
  const Handle gather = x.Alloc(z.bwd[kBwdGradGather], BwdTransientName(kBwdGradGather));
  const Handle grad_o = attn(kAttnBwdGradOut);
  x.Free(gather);
  x.Release(kAttnOut);
  // Unfused attention: the probabilities' gradients, then the saved probabilities go.
  const Handle d_probs = attn(kAttnBwdGradProbs);
  const Handle d_scores = attn(kAttnBwdGradScores);
  x.Release(kAttnProbsDropout);
  x.Release(kAttnProbs);
  const Handle dqkv = attn(kAttnBwdGradQkv);
  x.Free(d_probs);
  x.Free(d_scores);
  x.Free(grad_o);
  for (int slot : {int{kAttnSoftmaxStats}, int{kAttnQkv}, kSlotQ, kSlotK, int{kAttnMlaLatent},
                   int{kAttnQkNormInput}}) {
    x.Release(slot);
  }
  const Handle ln1_g = attn(kAttnBwdLn1Gather);
  Handle dgrad = attn(kAttnBwdQkvDgrad);
  x.Free(dqkv);
  x.Free(ln1_g);
  x.Release(kLn1Output);
  const Handle attn_rs = x.Alloc(s.sp ? s.local_hidden : 0, "bwd.qkv_dgrad_scatter");
  if (s.sp) x.Free(std::exchange(dgrad, Exec::kNone));
  const Handle grad_in =
      x.Alloc(s.local_hidden, "bwd.grad_input");  // input-norm backward + residual
  x.Free(dgrad);
  x.Free(attn_rs);
  x.Free(mid);
  for (int slot : {kLn1Input, kAttnDropoutMask, kLoraInput, kLoraHidden, kDoraScaled,
                   kPostNormInput, kCheckpointInput})
    x.Release(slot);
  for (Handle h : replay) x.Free(h);
  return grad_in;
}

// The most bytes one layer holds during its backward, LayerBackward walked in bytes after a
// LayerForward that kept everything: its saved tensors still live, the incoming gradient
// (local_hidden) and the working tensors made so far.
std::int64_t WalkLayerBackwardPeak(const LayerSizes& z, const LayerShape& s);

// The last stage's final norm, output layer and loss, one micro-batch (gpt_model.py;
// tensor_parallel/cross_entropy.py, fusions/fused_cross_entropy.py; tensor_parallel/layers.py
// for the output layer's weight gradient and defer_embedding_wgrad_compute). Sizes:
// JobFacts. `Exec` needs only Alloc and Free (as above).
template <class Handle>
struct OutputHeld {
  Handle final_in, final_out, logits;  // the final norm's input, the output layer's, logits
};

// Forward from the last layer's output `x`, which the final norm keeps.
template <class Exec>
OutputHeld<typename Exec::Handle> OutputForward(const JobFacts& f, typename Exec::Handle x,
                                                Exec& e) {
  using Handle = typename Exec::Handle;
  OutputHeld<Handle> held{x, Exec::kNone, Exec::kNone};
  // (With SP the output layer's input is all-gathered into MCore's persistent global buffer,
  // buf.output_gather, allocated at start-up: workspaces.h.)
  held.final_out = e.Alloc(f.output_hidden_per_mb - f.local_hidden_per_mb, "act.output_input");
  if (f.logits_per_mb == f.logits_transient) {
    held.logits = e.Alloc(f.logits_per_mb, "act.logits");
  } else {  // the bf16 logits, then what the loss keeps of them
    const Handle bf16 = e.Alloc(f.logits_transient, "fwd.logits");
    held.logits = e.Alloc(f.logits_per_mb, "act.logits");
    e.Free(bf16);
  }
  return held;
}

// Backward: frees `held` and returns the gradient of the final norm's input. `defer`:
// defer_embedding_wgrad_compute keeps this micro-batch's output-layer gradient and input for
// the wgrad after the pipeline flush, returned in `deferred` (kNone otherwise).
template <class Exec>
typename Exec::Handle OutputBackward(const JobFacts& f,
                                     const OutputHeld<typename Exec::Handle>& held, bool defer,
                                     typename Exec::Handle& deferred, Exec& e) {
  using Handle = typename Exec::Handle;
  const Handle grad_logits = e.Alloc(f.logits_transient, "bwd.grad_logits");
  e.Free(held.logits);
  const Handle grad = e.Alloc(f.local_hidden_per_mb, "bwd.grad_final_norm");
  // Without gradient_accumulation_fusion: the output layer's weight gradient, until the DDP
  // hook adds it to main_grad (JobFacts::output_wgrad).
  e.Free(e.Alloc(f.output_wgrad, "bwd.output_wgrad"));
  deferred = defer ? e.Alloc(f.deferred_wgrad_per_mb, "wgrad.deferred_output_layer") : Exec::kNone;
  e.Free(grad_logits);
  e.Free(held.final_out);
  e.Free(held.final_in);
  return grad;
}

// The most bytes the output layer holds in its backward (OutputBackward walked in bytes, no
// deferral): its kept tensors, the logits gradient and what the output layer adds.
std::int64_t WalkOutputBackwardPeak(const JobFacts& f);

}  // namespace memtune::tensors
