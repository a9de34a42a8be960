// The tensors one rank of a torchtitan Llama job under FSDP2 holds, sized from the job
// (memtune_tensors internal API, used by the estimator and the trace synthesizer;
// docs/estimator.md "FSDP2").
//
// The model is torchtitan's Llama (torchtitan 9dec370, models/llama/model.py): separate
// wq/wk/wv/wo and w1/w3/w2 nn.Linear weights, RMSNorm computed in fp32 then cast back,
// complex-number RoPE, repeat_kv before SDPA (flash), cross-entropy on an fp32 copy of the
// logits. FSDP2 (torch.distributed._composable.fsdp) shards every transformer block and
// the root module (embedding, final norm, output) on dim 0 over the shard mesh, with bf16
// compute parameters and fp32 gradient reduction by default. With qk_layernorm the block is
// torchtitan's Qwen3 block (torchtitan d880de214, models/qwen3/model/model.py): an RMSNorm
// over head_dim on q and on k before RoPE, and a real-valued rotate_half RoPE in bf16.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "memtune/core/result.h"
#include "memtune/model/job.h"

namespace memtune::tensors {

// One parameter on one rank: its TP-local shape and FSDP2's padded shard.
struct Fsdp2Param {
  const char* name = "";
  std::int64_t rows = 0, cols = 0;  // TP-local shape (dim 0 is FSDP2's shard dim)
  // FSDP2 chunks dim 0 into shard_degree pieces of ceil(rows / shard) rows; every rank
  // allocates a full piece (fsdp_param.py _init_sharded_param: padded_sharded_param_size).
  std::int64_t ShardElements(int shard) const { return (rows + shard - 1) / shard * cols; }
  std::int64_t Elements() const { return rows * cols; }
};

// A tensor of the activation model: bytes per micro-batch on one rank.
struct Fsdp2Tensor {
  const char* name = "";
  std::int64_t bytes = 0;
};

// How a transformer block keeps its activations (memtune.fsdp2.activation_checkpoint).
using Fsdp2Ac = model::Fsdp2Checkpoint;

struct Fsdp2Facts {
  int tp = 1, cp = 1, layers = 0;
  int shard = 1;                  // FSDP2 mesh: dp_shard * cp ranks share each parameter
  int replicate = 1;              // HSDP replicas
  int selective_layer_every = 2;  // torchtitan selective_ac_option default "2"
  Fsdp2Ac ac = Fsdp2Ac::kNone;
  bool compile = false, float8 = false, reshard_after_forward = true;
  bool compile_loss = false;      // the cross-entropy runs under torch.compile
  int param_bytes = 2;            // mp_policy.param_dtype (compute copy)
  int reduce_bytes = 4;           // mp_policy.reduce_dtype (gradient reduce-scatter)
  std::int64_t microbatches = 1;  // gradient-accumulation steps per optimizer step
  std::int64_t tokens = 0;        // b * s / cp: one micro-batch's tokens on this rank
  std::int64_t vocab_local = 0;   // vocabulary columns of the logits on this rank
  // TP-local widths: hidden, q (heads * head dim), kv, heads, ffn; repeat_kv copies k/v to
  // the query heads when num_query_groups < num_attention_heads.
  std::int64_t hidden = 0, q_local = 0, kv_local = 0, heads_local = 0, ffn_local = 0;
  bool repeat_kv = false;
  std::int64_t seq_length = 0, head_dim = 0;
  // qk_layernorm: torchtitan's Qwen3 attention (q_norm / k_norm nn.RMSNorm(head_dim) on the
  // wq / wk outputs, then RoPE as (x * cos) + (rotate_half(x) * sin) in bf16).
  bool qk_norm = false;
  // The RoPE buffer: Llama's freqs_cis, complex64 (seq, head_dim / 2); Qwen3's rope_cache,
  // fp32 (seq, 2 * head_dim) (cos and sin concatenated).
  std::int64_t rope_buffer_bytes = 0;
  // PyTorch cuBLAS workspaces: every GEMM is a torch GEMM, run by the Python thread
  // (forward) and the autograd engine's thread (backward): two (workspaces.h).
  std::int64_t torch_workspace_bytes = 0;
  bool loss_parallel = false;  // TP > 1: torchtitan's loss_parallel (DTensor handlers)

  // Pipeline parallelism (torchtitan v0.2.2 distributed/pipeline_parallel.py with the
  // schedules of torch.distributed.pipelining): stage `stage` of pp x virtual_stages,
  // blocks [first_layer, first_layer + layers); stage 0 the embedding, the last
  // stage the final norm and output. Each stage is its own FSDP root; the pipeline stage
  // turns off gradient sync and reshard-after-backward for every micro-batch
  // (stage.py backward_maybe_with_nosync), so every parameter keeps an unsharded gradient
  // (`accumulate_bytes` per element) from its first backward until the reduce at the end
  // of the step (perform_reduce_grad).
  int pp = 1, stage = 0, first_layer = 0;
  // Stages per rank (Interleaved1F1B: `virtual_stages`, placed "loop" style: rank r holds
  // stages r, r + pp, ...; torchtitan pipeline_parallel.py _get_stage_indices).
  int virtual_stages = 1;
  int Rank() const { return stage % pp; }
  int LocalStage() const { return stage / pp; }
  bool has_embedding = true, has_head = true;
  model::Fsdp2PipelineSchedule schedule = model::Fsdp2PipelineSchedule::k1F1B;
  int accumulate_bytes = 4;
  bool Pipelined() const { return pp > 1; }
  // One boundary tensor between stages (the residual stream, sequence-sharded under TP).
  std::int64_t BoundaryBytes() const { return 2 * (tokens / tp) * hidden; }
  // The rank's forward/backward order over its local stages (without pipeline parallelism:
  // each micro-batch's forward, then its backward). 1F1B (schedules.py
  // Schedule1F1B): min(n, pp - stage) forwards, then one backward and one forward in turn,
  // then the remaining backwards; GPipe: every forward, then every backward;
  // Interleaved1F1B (ScheduleInterleaved1F1B _get_1f1b_rank_ops): warm-up forwards, then a
  // forward and a backward per step, then the remaining backwards, the local stage of step
  // s being (s / per_round) % V forward and V - 1 - ((s - warmup) / per_round) % V backward.
  struct Op {
    bool forward = true;
    int local_stage = 0;
    int microbatch = 0;
    bool operator==(const Op&) const = default;
  };
  std::vector<Op> RankOrder() const;

  std::vector<Fsdp2Param> block_params;  // one transformer block
  // tok_embeddings, norm, output; under pipeline parallelism only the stage's own (the
  // embedding on stage 0, norm and output on the last), one FSDP group either way.
  std::vector<Fsdp2Param> root_params;

  // Activations of one block, per micro-batch.
  std::vector<Fsdp2Tensor> block_eager;  // saved without AC (recompute re-creates these)
  std::vector<Fsdp2Tensor> block_sac;    // selective_op: the policy's MUST_SAVE outputs
  std::int64_t block_input_bytes = 0;    // the block input a checkpoint keeps
  std::vector<Fsdp2Tensor> outside;      // tokens, final norm and output-layer inputs

  // Loss on one micro-batch: bf16 logits, fp32 copy, log-softmax output, gradients.
  std::int64_t logits_bytes = 0;       // output-layer result in bf16
  std::int64_t logits_fp32_bytes = 0;  // one fp32 tensor of the logits' shape
  // Compiled loss: AOTAutograd's partitioner saves the bf16 logits and two fp32 statistics
  // per row (max and log-sum-exp) instead of the fp32 log-softmax; the backward is one fused
  // kernel writing the bf16 logits gradient (the .float() cast's backward folded in).
  std::int64_t loss_row_stats_bytes = 0;
  // The loss's tensors live at its backward's peak, in bytes: what it saved plus what its
  // backward allocates.
  std::int64_t LossBackwardPeakBytes() const;
  // fp32 logits-shaped tensors live at the cross-entropy backward's peak: 3 for PyTorch's
  // nll_loss + log_softmax backward (saved output, its gradient, the input gradient); 4
  // with loss_parallel (torch/distributed/tensor/parallel/loss.py
  // _nll_loss_and_log_softmax_backward: saved output, zeros_like, exp, their sum).
  int LossBackwardTensors() const { return loss_parallel ? 4 : 3; }

  // Per-rank sums.
  std::int64_t BlockShardElements() const;
  std::int64_t RootShardElements() const;
  std::int64_t BlockUnshardedElements() const;  // padded: shard * piece, all params
  std::int64_t RootUnshardedElements() const;
  // Output and final-norm weights (TP-local, unpadded): their gradients come first in
  // backward and wait for the root's reduce-scatter at its end.
  std::int64_t HeadElements() const;
  // Bytes one block keeps for backward under the AC mode (block `layer`).
  std::int64_t BlockKeptBytes(int layer) const;
  // Whether block `layer` runs under a checkpoint (its backward recomputes).
  bool Checkpointed(int layer) const;
  std::int64_t BlockEagerBytes() const;
  std::int64_t OutsideBytes() const;
};

// Sizes a torchtitan FSDP2 job's pipeline stage `stage` (0 without pipeline parallelism).
// Errors: kUnsupported for what is not modelled (MoE, MLA, compile without activation
// checkpointing, qk_layernorm with compile or context parallelism, reshard_after_forward
// under pipeline parallelism), kInvalidConfig for a shard degree that does not fit the world
// size or a pipeline torchtitan cannot split (fewer than two effective layers per stage).
Result<Fsdp2Facts> MakeFsdp2Facts(const model::Job& job, int stage = 0);

// The blocks of each pipeline stage, torchtitan's generate_llm_fqn_per_model_part (v0.2.2,
// pipeline_parallel.py) with its default weights: the embedding and the norm + output each
// count as one layer, `num_layers + 2` effective layers are split evenly and the first
// stages take one more each. Errors: kInvalidConfig where torchtitan raises ValueError.
Result<std::vector<int>> Fsdp2StageLayers(std::int64_t num_layers, int pp);

}  // namespace memtune::tensors
