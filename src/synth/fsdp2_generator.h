// The event generator of one torchtitan FSDP2 rank (private): start-up, every iteration's
// forward, loss, backward and optimizer step, with FSDP2's all-gather and reduce-scatter
// buffers on their own streams (docs/synth.md "FSDP2").
#pragma once

#include <memory>
#include <vector>

#include "memtune/synth/synthesize.h"
#include "synth/emitter.h"
#include "tensors/fsdp2_tensors.h"

namespace memtune::synth {

class Fsdp2Generator {
 public:
  Fsdp2Generator(const tensors::Fsdp2Facts& facts, int iterations, EventSink& sink);
  // One trace without pipeline parallelism (`facts` not Pipelined()).
  TraceSummary Run();
  // One pipeline rank's trace: its local stages (the facts of stages r, r + pp, ... in
  // order), driven by the rank's schedule (Fsdp2Facts::RankOrder); each stage reduces its
  // gradients right after its last backward, then every stage's optimizer steps.
  static TraceSummary RunRank(const std::vector<const tensors::Fsdp2Facts*>& stages, int iterations,
                              EventSink& sink);

 private:
  using HandleId = alloc::HandleId;
  static constexpr HandleId kNone = Emitter::kNone;
  // Streams FSDP2 allocates on (torch fsdp _fsdp_param_group.py / _fsdp_collectives.py):
  // the all-gather copy-in stream owns the all-gather output; the reduce-scatter stream
  // owns the reduce-scatter output, which becomes the sharded gradient.
  static constexpr alloc::StreamId kCompute = 0, kAllGather = 1, kReduceScatter = 2;
  static constexpr int kRoot = -1;

  struct Exec;  // runs estimate/fsdp2_backward.h's op sequences (fsdp2_block.cc)
  struct Named {
    const char* name;
    HandleId handle;
  };

  HandleId Alloc(std::int64_t bytes, const char* tensor, alloc::StreamId stream = kCompute);
  void Free(HandleId& handle);  // and resets `handle` to kNone
  void FreeAll(std::vector<HandleId>& handles);
  // Tensors of one group (a block index, or kRoot).
  const std::vector<tensors::Fsdp2Param>& Params(int group) const;
  std::vector<HandleId>& Unsharded(int group);

  void SizeState();  // the per-group and per-block vectors, sized from the facts
  void Startup();
  // tok_embeddings (RowwiseParallel under TP: partial sums, then reduce-scatter to the
  // sequence shard; its backward keeps only the token ids), the root gathered first.
  // Returns the first block's input.
  HandleId Embed();
  // The final norm on `x` (freed after it; kNone: nothing to free) and, under TP, the output
  // layer's all-gathered input; what backward needs goes to `kept`.
  void NormForOutput(HandleId x, std::vector<Named>& kept);
  void Unshard(int group);
  void Reshard(int group);
  void ReduceScatter(int group, std::vector<HandleId>& unsharded_grads, bool accumulate);
  void Forward(int microbatch);
  void Backward(int microbatch);
  // One block's forward ops (reading its input, already live); returns the block output.
  // `kept` receives what backward needs under the AC mode (recompute: the eager saved set,
  // everything re-created, and kNone for the output).
  HandleId BlockForward(int layer, bool recompute, std::vector<Named>& kept);
  // One block's backward: consumes (frees) `saved` and the output gradient, returns the
  // input gradient; the block's unsharded weight gradients go to `weight_grads`.
  HandleId BlockBackward(HandleId grad_out, std::vector<Named>& saved,
                         std::vector<HandleId>& weight_grads);
  // The eager final RMSNorm (models/norms.py): x.float() and the bf16 normalised output are
  // saved in `kept`; returns the output (`* weight`).
  HandleId FinalNorm(std::vector<Named>& kept);
  // The RMSNorm backward's fp32 temporaries; returns the input gradient (bf16, local rows).
  HandleId NormBackward(bool fused);
  // The loss on the output layer's logits; `keep_logits`: the logits stay alive (the
  // pipeline stage caches its output until the micro-batch's backward) and are returned.
  HandleId Loss(bool keep_logits = false);
  HandleId LossBackward();
  void OptimizerStep(int iteration);

  // Pipeline parallelism (Fsdp2Facts::Pipelined): one stage's schedule per step.
  struct StageMicrobatch {  // what the stage caches per micro-batch until its backward
    std::vector<std::vector<Named>> block_saved;
    std::vector<Named> outside;
    std::vector<HandleId> loss_saved;
    HandleId input = kNone;   // the received activation (fwd_cache's inputs)
    HandleId output = kNone;  // the stage output (or the logits on the last stage)
  };
  // A local stage of a pipeline rank, sharing the rank's emitter.
  Fsdp2Generator(const tensors::Fsdp2Facts& facts, int iterations, Emitter& shared);
  void ZeroGradAndBatch(int iteration);  // the step's gradients freed, its batch loaded
  void StageForward(int microbatch);
  void StageBackward(int microbatch);
  // post_backward without gradient sync: the first micro-batch turns each unsharded
  // gradient into an accumulator (accumulate_bytes per element), later ones add into it.
  void Accumulate(int group, std::vector<HandleId>& unsharded_grads);
  // perform_reduce_grad: every group's accumulated gradients reduce-scattered, in FSDP
  // state order (embedding, blocks, norm + output), each group resharded after.
  void ReduceAccumulated();

  const tensors::Fsdp2Facts& f_;
  int iterations_ = 1;
  std::unique_ptr<Emitter> own_emitter_;  // null for a local stage of a pipeline rank
  Emitter& emit_;
  EventLabel& label_;  // emit_'s label

  std::vector<std::vector<HandleId>> shards_;     // [group] fp32 parameter shards
  std::vector<std::vector<HandleId>> unsharded_;  // [group] all-gathered parameters
  std::vector<HandleId> grads_;                   // reduce-scatter outputs (sharded grads)
  std::vector<HandleId> exp_avg_, exp_avg_sq_;
  std::vector<std::vector<Named>> block_saved_;  // [layer] kept after forward
  std::vector<Named> outside_;                   // final norm / output inputs
  HandleId tokens_ = kNone, labels_ = kNone, root_head_grads_ = kNone;
  std::vector<HandleId> loss_saved_;  // what the loss keeps for its backward
  HandleId persistent_freqs_ = kNone;
  HandleId pending_rs_input_ = kNone;               // freed by the next reduce-scatter
  std::vector<bool> gathered_;                      // [group + 1] unsharded now
  std::vector<StageMicrobatch> stage_mb_;           // [micro-batch], pipeline only
  std::vector<std::vector<HandleId>> accumulated_;  // [group + 1] unsharded gradients
};

}  // namespace memtune::synth
