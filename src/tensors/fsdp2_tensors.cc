// torchtitan Llama under FSDP2: parameters, saved activations and transients of one rank.
// Every tensor is named after the torchtitan operation that creates or saves it
// (torchtitan 9dec370 models/llama/model.py, models/norms.py, parallelisms/
// parallelize_llama.py, train.py; PyTorch autograd's saved tensors per op).
#include "tensors/fsdp2_tensors.h"

#include <algorithm>
#include <iterator>
#include <string_view>
#include <utility>

#include "memtune/model/parameters.h"
#include "tensors/workspaces.h"

namespace memtune::tensors {
namespace {

std::int64_t Sum(const std::vector<Fsdp2Tensor>& list) {
  std::int64_t total = 0;
  for (const auto& t : list) total += t.bytes;
  return total;
}

// What the pipeline-parallel model covers: torchtitan's single-stage schedules with its
// default FSDP policy under PP (no reshard after forward).
Status CheckPipelineModelled(const model::Job& job) {
  const auto& m = job.model;
  if (job.memtune.fsdp2.reshard_after_forward) {
    return Unsupported("memtune.fsdp2.reshard_after_forward",
                       "true with pipeline parallelism (torchtitan's \"always\" policy: an "
                       "all-gather per micro-batch) is not modelled; torchtitan's default under "
                       "PP is false");
  }
  const int v = m.virtual_pipeline_model_parallel_size.value_or(1);
  const bool interleaved =
      job.memtune.fsdp2.pipeline_schedule == model::Fsdp2PipelineSchedule::kInterleaved1F1B;
  if (interleaved != (v > 1)) {
    const std::string field = "model.virtual_pipeline_model_parallel_size";
    if (interleaved) {
      return InvalidConfig(field, "Interleaved1F1B needs at least 2 stages per rank",
                           "allowed: set " + field + " to 2 (torchtitan's default) or 3");
    }
    return InvalidConfig(
        field,
        field + " = " + std::to_string(v) + " stages per rank needs the Interleaved1F1B schedule",
        "allowed: set memtune.fsdp2.pipeline_schedule: Interleaved1F1B");
  }
  // The runtime schedule keeps at most 3 local stages gathered (_add_unshard_reshard,
  // max_active_stages=3); beyond that stages are resharded mid-step: not modelled.
  if (v > 3) {
    return Unsupported("model.virtual_pipeline_model_parallel_size",
                       "more than 3 stages per rank (FSDP reshards stages mid-step) is not "
                       "modelled");
  }
  if (std::max(1, m.context_parallel_size) > 1) {
    return Unsupported("model.context_parallel_size",
                       "fsdp2 with both pipeline and context parallelism is not modelled");
  }
  // torchtitan models/common/decoder.py: "Weight tying is not supported with Pipeline
  // Parallel."
  if (m.share_embeddings_and_output_weights) {
    return InvalidConfig("model.share_embeddings_and_output_weights",
                         "torchtitan does not support weight tying with pipeline parallelism");
  }
  return OkStatus();
}

Status CheckModelled(const model::Job& job) {
  const auto& m = job.model;
  const int cp = std::max(1, m.context_parallel_size);
  if (m.pipeline_model_parallel_size > 1) {
    MEMTUNE_RETURN_IF_ERROR(CheckPipelineModelled(job));
  }
  // torchtitan train.py create_context_parallel_ctx: the sequence is load-balanced in
  // 2 * cp chunks (torch _context_parallel_buffers).
  if (cp > 1 && m.seq_length % (2 * cp) != 0) {
    return InvalidConfig("model.seq_length",
                         std::to_string(m.seq_length) + " must be divisible by 2 * " +
                             "context_parallel_size = " + std::to_string(2 * cp));
  }
  if (m.num_moe_experts.value_or(0) > 0) {
    return Unsupported("model.num_moe_experts", "fsdp2 MoE models are not modelled yet");
  }
  if (m.multi_latent_attention) {
    return Unsupported("model.multi_latent_attention", "fsdp2 MLA models are not modelled yet");
  }
  // torchtitan's Llama block: RMSNorm, bias-free projections, SwiGLU feed-forward.
  auto llama_only = [](const char* field, const std::string& value) {
    return Unsupported(
        field,
        "fsdp2 jobs are modelled as torchtitan's Llama (RMSNorm, no biases, SwiGLU with "
        "silu); got " +
            value);
  };
  if (!m.gated_linear_unit) return llama_only("model.gated_linear_unit", "false");
  if (m.activation_func != "silu") return llama_only("model.activation_func", m.activation_func);
  if (m.normalization != model::Normalization::kRMSNorm)
    return llama_only("model.normalization", "LayerNorm");
  if (m.add_bias_linear) return llama_only("model.add_bias_linear", "true");
  if (m.add_qkv_bias) return llama_only("model.add_qkv_bias", "true");
  if (m.sublayer_post_norms) return llama_only("model.sublayer_post_norms", "true");
  if (m.final_logit_softcapping.value_or(0) > 0) {
    return llama_only("model.final_logit_softcapping", "set");
  }
  // torchtitan's TP plan splits heads, KV heads and the FFN across TP ranks evenly
  // (Attention.forward views the local wq/wk/wv outputs as whole heads).
  const std::int64_t tp = std::max(1, m.tensor_model_parallel_size);
  for (auto [field, value] :
       {std::pair{"model.num_attention_heads", m.num_attention_heads},
        std::pair{"model.num_query_groups", model::EffectiveQueryGroups(m)},
        std::pair{"model.ffn_hidden_size", model::EffectiveFfnHiddenSize(m)}}) {
    if (value % tp != 0) {
      return InvalidConfig(
          field, std::to_string(value) + " is not divisible by tensor_model_parallel_size " +
                     std::to_string(tp) + " (torchtitan shards heads and the FFN evenly)");
    }
  }
  if (job.memtune.fsdp2.param_dtype != model::Dtype::kBf16) {  // activations are sized in bf16
    return Unsupported("memtune.fsdp2.param_dtype",
                       "only bf16 compute (torchtitan's default mixed precision) is modelled");
  }
  if (m.qk_layernorm && job.memtune.fsdp2.compile) {
    return Unsupported("model.qk_layernorm",
                       "qk_layernorm (torchtitan's Qwen3 block) under torch.compile saves what "
                       "inductor's partitioner picks for the fused q/k norms; not modelled (set "
                       "memtune.fsdp2.compile: false)");
  }
  // torchtitan d880de214 train.py passes `m.freqs_cis` of every model part to the CP context;
  // its Qwen3 model names that buffer rope_cache, so Qwen3 with CP does not run there.
  if (m.qk_layernorm && std::max(1, m.context_parallel_size) > 1) {
    return Unsupported("model.qk_layernorm",
                       "qk_layernorm (torchtitan's Qwen3 block) with context parallelism: "
                       "torchtitan d880de214 shards freqs_cis, which its Qwen3 model lacks "
                       "(rope_cache); not modelled");
  }
  if (job.memtune.fsdp2.compile && job.memtune.fsdp2.activation_checkpoint == Fsdp2Ac::kNone) {
    return Unsupported("memtune.fsdp2.compile",
                       "torch.compile without activation checkpointing saves what inductor's "
                       "min-cut partitioner picks; not modelled (set activation_checkpoint)");
  }
  if (m.num_layers <= 0 || m.hidden_size <= 0 || m.num_attention_heads <= 0 || m.seq_length <= 0) {
    return InvalidConfig(
        "model", "num_layers, hidden_size, num_attention_heads and seq_length must be positive");
  }
  return OkStatus();
}

// Parameters of one block and of the root module, TP-local (torchtitan's TP plan:
// wq/wk/wv/w1/w3 ColwiseParallel, wo/w2 RowwiseParallel, norms SequenceParallel,
// tok_embeddings RowwiseParallel over the vocabulary, output ColwiseParallel).
void AddParams(const model::Job& job, int tp, Fsdp2Facts& f) {
  const auto& m = job.model;
  const std::int64_t h = m.hidden_size;
  const std::int64_t q = m.num_attention_heads * model::EffectiveKvChannels(m);
  const std::int64_t kv = model::EffectiveQueryGroups(m) * model::EffectiveKvChannels(m);
  const std::int64_t ffn = model::EffectiveFfnHiddenSize(m);
  const std::int64_t vocab = model::PaddedVocabSize(job);
  f.block_params = {
      {"attention_norm.weight", h, 1},         {"attention.wq.weight", q / tp, h},
      {"attention.wk.weight", kv / tp, h},     {"attention.wv.weight", kv / tp, h},
      {"attention.wo.weight", h, q / tp},      {"ffn_norm.weight", h, 1},
      {"feed_forward.w1.weight", ffn / tp, h}, {"feed_forward.w2.weight", h, ffn / tp},
      {"feed_forward.w3.weight", ffn / tp, h},
  };
  if (m.qk_layernorm) {  // Qwen3 Attention: nn.RMSNorm(head_dim), NoParallel under TP
    const std::int64_t head_dim = model::EffectiveKvChannels(m);
    f.block_params.push_back({"attention.q_norm.weight", head_dim, 1});
    f.block_params.push_back({"attention.k_norm.weight", head_dim, 1});
  }
  // DTensor shards an uneven vocabulary in ceil-sized pieces: the first ranks hold the most.
  const std::int64_t vocab_local = (vocab + tp - 1) / tp;
  f.root_params = {{"tok_embeddings.weight", vocab_local, h}, {"norm.weight", h, 1}};
  if (!m.share_embeddings_and_output_weights)
    f.root_params.push_back({"output.weight", vocab_local, h});
  f.vocab_local = vocab_local;
}

// Qwen3's q_norm / k_norm and RoPE (torchtitan d880de214 models/qwen3/model/model.py
// Attention.forward, apply_rotary_emb): nn.RMSNorm over head_dim runs PyTorch's composite
// rms_norm (aten/src/ATen/native/layer_norm.cpp rms_norm_symint, PyTorch 2.6: input.to(fp32),
// pow, mean, rsqrt, mul, type_as, `* weight`), whose autograd saves the fp32 input (pow, mul),
// the fp32 rstd of every (token, head) (rsqrt, mul) and the bf16 normalised output (`*
// weight`, for the weight gradient). RoPE multiplies by cos and sin, bf16 copies of
// rope_cache[:seq] (.to(xq.dtype)), which the two multiplies save; rotate_half's slices,
// neg and cat save nothing.
void AddQkNormActivations(Fsdp2Facts& f) {
  constexpr std::int64_t a = 2, fp32 = 4;
  const std::int64_t n = f.tokens, hd = f.head_dim;
  const std::int64_t kv_heads = f.kv_local / hd;
  const Fsdp2Tensor added[] = {
      {"qnorm.x_fp32", fp32 * n * f.q_local}, {"qnorm.rstd", fp32 * n * f.heads_local},
      {"qnorm.normed", a * n * f.q_local},    {"knorm.x_fp32", fp32 * n * f.kv_local},
      {"knorm.rstd", fp32 * n * kv_heads},    {"knorm.normed", a * n * f.kv_local},
      {"rope.cos", a * f.seq_length * hd},    {"rope.sin", a * f.seq_length * hd}};
  f.block_eager.insert(f.block_eager.end(), std::begin(added), std::end(added));
}

// Saved tensors of one block without activation checkpointing, in forward order. r = rows
// of the residual stream on this rank (sequence-sharded under TP), n = tokens of a GEMM.
void AddBlockActivations(const model::Job& job, Fsdp2Facts& f) {
  const auto& m = job.model;
  const int tp = f.tp;
  const std::int64_t n = f.tokens, r = f.tokens / tp, h = m.hidden_size;
  const std::int64_t q = m.num_attention_heads * model::EffectiveKvChannels(m) / tp;
  const std::int64_t kv = model::EffectiveQueryGroups(m) * model::EffectiveKvChannels(m) / tp;
  const std::int64_t heads = m.num_attention_heads / tp;
  const std::int64_t ffn = model::EffectiveFfnHiddenSize(m) / tp;
  const bool repeat = model::EffectiveQueryGroups(m) != m.num_attention_heads;
  f.hidden = h;
  f.q_local = q;
  f.kv_local = kv;
  f.heads_local = heads;
  f.ffn_local = ffn;
  f.repeat_kv = repeat;
  f.seq_length = m.seq_length;
  f.head_dim = model::EffectiveKvChannels(m);
  f.loss_parallel = tp > 1;
  f.qk_norm = m.qk_layernorm;
  // Llama precompute_freqs_cis: complex64 (seq, head_dim / 2); Qwen3 precompute_rope_cache:
  // fp32 cat([cos, sin]) of (seq, head_dim) each.
  f.rope_buffer_bytes =
      f.qk_norm ? 4 * f.seq_length * 2 * f.head_dim : 8 * f.seq_length * (f.head_dim / 2);
  const std::int64_t kv_sdpa = repeat ? q : kv;  // repeat_kv materialises n_heads copies
  constexpr std::int64_t a = 2, fp32 = 4;
  if (!f.compile) {
    f.block_eager = {
        // RMSNorm: pow saves x.float(); the `* weight` saves the bf16 normalised output.
        {"norm1.x_fp32", fp32 * r * h},
        {"norm1.normed", a * r * h},
        // wq/wk/wv save their input (all-gathered over TP: Replicate input layout).
        {"attn.gemm_input", a * n * h},
    };
    if (f.qk_norm) {
      AddQkNormActivations(f);
    } else {
      // apply_rotary_emb: the complex multiply saves xq.float() / xk.float().
      f.block_eager.push_back({"rope.q_fp32", fp32 * n * q});
      f.block_eager.push_back({"rope.k_fp32", fp32 * n * kv});
    }
    const std::vector<Fsdp2Tensor> rest = {
        // SDPA (flash) saves q, k, v, out and the fp32 logsumexp; out is wo's input.
        {"sdpa.q", a * n * q},
        {"sdpa.k", a * n * kv_sdpa},
        {"sdpa.v", a * n * kv_sdpa},
        {"sdpa.out", a * n * q},
        {"sdpa.lse", fp32 * n * heads},
        {"norm2.x_fp32", fp32 * r * h},
        {"norm2.normed", a * r * h},
        {"mlp.gemm_input", a * n * h},
        // w2(silu(w1 x) * w3 x): silu saves its input; mul saves both factors; w2 its input.
        {"mlp.w1_out", a * n * ffn},
        {"mlp.silu_out", a * n * ffn},
        {"mlp.w3_out", a * n * ffn},
        {"mlp.w2_in", a * n * ffn},
    };
    f.block_eager.insert(f.block_eager.end(), rest.begin(), rest.end());
  } else {
    // Compiled block (only under activation checkpointing, see CheckModelled): inductor
    // fuses RMSNorm, RoPE and SiLU*mul, so their fp32 and pointwise intermediates are not
    // materialised; backward needs the GEMM inputs, attention tensors and norm inputs.
    f.block_eager = {
        {"attn.gemm_input", a * n * h}, {"sdpa.q", a * n * q},
        {"sdpa.k", a * n * kv_sdpa},    {"sdpa.v", a * n * kv_sdpa},
        {"sdpa.out", a * n * q},        {"sdpa.lse", fp32 * n * heads},
        {"residual.mid", a * r * h},    {"mlp.gemm_input", a * n * h},
        {"mlp.w1_out", a * n * ffn},    {"mlp.w3_out", a * n * ffn},
        {"mlp.w2_in", a * n * ffn},
    };
  }
  // parallelize_llama.py _save_list with "every second mm recomputed": mm #1 wq, #3 wv,
  // #5 w1, #7 w2 (a row-parallel output is the full-sequence partial sum), and flash SDPA.
  // Eager SAC caches every MUST_SAVE output (torch/utils/checkpoint.py
  // _CachingTorchDispatchMode stores them whether backward reads them or not); compiled, the
  // policy only tags graph nodes and AOTAutograd's partitioner saves what the backward graph
  // reads, which w2's output (consumed by the residual add) is not.
  f.block_sac = {
      {"sac.wq_out", a * n * q}, {"sac.wv_out", a * n * kv},     {"sac.w1_out", a * n * ffn},
      {"sdpa.out", a * n * q},   {"sdpa.lse", fp32 * n * heads},
  };
  if (!f.compile) f.block_sac.push_back({"sac.w2_out", a * n * h});
  f.block_input_bytes = a * r * h;
  f.outside = {
      {"tokens", 8 * n * 2},  // input ids and labels (int64) on the device
      {"final_norm.x_fp32", fp32 * r * h},
      {"final_norm.normed", a * r * h},
      {"output.gemm_input", a * n * h},
  };
  f.logits_bytes = a * n * f.vocab_local;
  f.logits_fp32_bytes = fp32 * n * f.vocab_local;
  f.loss_row_stats_bytes = 2 * fp32 * n;
}

}  // namespace

std::int64_t Fsdp2Facts::LossBackwardPeakBytes() const {
  // Compiled: the saved bf16 logits and row statistics, and the bf16 gradient. Eager: the
  // saved log-softmax output plus the other fp32 tensors of its backward.
  return compile_loss ? 2 * logits_bytes + loss_row_stats_bytes
                      : LossBackwardTensors() * logits_fp32_bytes;
}

std::int64_t Fsdp2Facts::BlockShardElements() const {
  std::int64_t total = 0;
  for (const auto& p : block_params) total += p.ShardElements(shard);
  return total;
}

std::int64_t Fsdp2Facts::RootShardElements() const {
  std::int64_t total = 0;
  for (const auto& p : root_params) total += p.ShardElements(shard);
  return total;
}

std::int64_t Fsdp2Facts::BlockUnshardedElements() const { return BlockShardElements() * shard; }
std::int64_t Fsdp2Facts::RootUnshardedElements() const { return RootShardElements() * shard; }

std::int64_t Fsdp2Facts::HeadElements() const {
  std::int64_t elements = 0;
  for (const auto& p : root_params) {
    if (std::string_view(p.name) != "tok_embeddings.weight") elements += p.Elements();
  }
  return elements;
}

bool Fsdp2Facts::Checkpointed(int layer) const {
  switch (ac) {
    case Fsdp2Ac::kNone:
      return false;
    case Fsdp2Ac::kSelectiveOp:
    case Fsdp2Ac::kFull:
      return true;
    // torchtitan _apply_ac_to_transformer_block: a global counter, checkpoint when
    // count % ac_freq == 0; the count starts at 1 for layer 0.
    case Fsdp2Ac::kSelectiveLayer:
      return (layer + 1) % selective_layer_every == 0;
  }
  return false;
}

std::int64_t Fsdp2Facts::BlockKeptBytes(int layer) const {
  if (ac == Fsdp2Ac::kSelectiveOp) return block_input_bytes + Sum(block_sac);
  if (Checkpointed(layer)) return block_input_bytes;
  return BlockEagerBytes();
}

std::int64_t Fsdp2Facts::BlockEagerBytes() const { return Sum(block_eager); }
std::int64_t Fsdp2Facts::OutsideBytes() const { return Sum(outside); }

Result<std::vector<int>> Fsdp2StageLayers(std::int64_t num_layers, int pp) {
  constexpr std::int64_t kInputWeight = 1, kOutputWeight = 1;  // first/last_stage_less_layers
  if (pp <= 1) return std::vector<int>{static_cast<int>(num_layers)};
  const std::int64_t effective = num_layers + kInputWeight + kOutputWeight;
  const std::int64_t per_stage = effective / pp, extra = effective % pp;
  if (per_stage < std::max(kInputWeight, kOutputWeight)) {  // also "empty stages"
    return InvalidConfig("model.pipeline_model_parallel_size",
                         std::to_string(pp) + " stages for " + std::to_string(num_layers) +
                             " layers: torchtitan counts the embedding and the output as one "
                             "layer each and needs at least one per stage beside them");
  }
  std::vector<int> layers;
  std::int64_t placed = 0;
  for (int s = 0; s < pp; ++s) {
    std::int64_t count = per_stage + (s < extra ? 1 : 0);
    if (s == 0) count -= kInputWeight;
    if (s == pp - 1) count -= kOutputWeight;
    count = std::min(count, num_layers - placed);  // "if current_layer < num_layers"
    layers.push_back(static_cast<int>(count));
    placed += count;
  }
  return layers;
}

std::vector<Fsdp2Facts::Op> Fsdp2Facts::RankOrder() const {
  const int n = static_cast<int>(microbatches);
  std::vector<Op> order;
  if (schedule == model::Fsdp2PipelineSchedule::kGPipe && Pipelined()) {
    for (int m = 0; m < n; ++m) order.push_back({true, 0, m});
    for (int m = 0; m < n; ++m) order.push_back({false, 0, m});
    return order;
  }
  if (schedule != model::Fsdp2PipelineSchedule::kInterleaved1F1B || !Pipelined()) {
    // Schedule1F1B._step_microbatches: warmup_chunks = min(n, num_stages - stage_index);
    // one stage (no pipeline) alternates forward and backward.
    const int warmup = std::min(n, pp - stage);
    int forward = 0, backward = 0;
    while (forward < warmup) order.push_back({true, 0, forward++});
    while (backward < n) {
      order.push_back({false, 0, backward++});
      if (forward < n) order.push_back({true, 0, forward++});
    }
    return order;
  }
  // ScheduleInterleaved1F1B (schedules.py 00722e648b): rounds = max(1, n // P),
  // microbatches_per_round = n // rounds; warmup_ops = min((V - 1) * per_round +
  // 2 * (P - 1 - rank), n * V); each of the n * V - warmup_ops steady steps is a forward
  // then a backward; the cooldown runs the remaining backwards.
  const int v = virtual_stages, rank = Rank();
  const int per_round = n / std::max(1, n / pp);
  const int warmup = std::min((v - 1) * per_round + 2 * (pp - 1 - rank), n * v);
  std::vector<int> next_forward(v, 0), next_backward(v, 0);
  auto forward = [&](int step) {
    const int local = (step / per_round) % v;
    order.push_back({true, local, next_forward[local]++});
  };
  auto backward = [&](int step) {
    const int local = v - 1 - ((step - warmup) / per_round) % v;
    order.push_back({false, local, next_backward[local]++});
  };
  for (int step = 0; step < warmup; ++step) forward(step);
  for (int step = warmup; step < n * v; ++step) {
    forward(step);
    backward(step);
  }
  for (int step = n * v; step < n * v + warmup; ++step) backward(step);
  return order;
}

Result<Fsdp2Facts> MakeFsdp2Facts(const model::Job& job, int stage) {
  MEMTUNE_RETURN_IF_ERROR(CheckModelled(job));
  const auto& m = job.model;
  const auto& cfg = job.memtune.fsdp2;
  Fsdp2Facts f;
  f.ac = cfg.activation_checkpoint;
  f.tp = std::max(1, m.tensor_model_parallel_size);
  const int world = job.memtune.world_size > 0 ? job.memtune.world_size : f.tp;
  const int model_ranks =
      f.tp * std::max(1, m.pipeline_model_parallel_size) * std::max(1, m.context_parallel_size);
  const int dp_shard = cfg.shard_degree > 0 ? cfg.shard_degree : world / model_ranks;
  f.cp = std::max(1, m.context_parallel_size);
  // parallelize_llama.py: FSDP shards over the dp_shard x cp mesh ("dp_shard_cp").
  f.shard = dp_shard * f.cp;
  if (dp_shard <= 0 || world % (dp_shard * model_ranks) != 0) {
    return InvalidConfig("memtune.fsdp2.shard_degree",
                         std::to_string(cfg.shard_degree) +
                             " does not divide world / (TP*PP*CP) = " + std::to_string(world) +
                             " / " + std::to_string(model_ranks));
  }
  f.replicate = world / (dp_shard * model_ranks);
  f.torch_workspace_bytes =
      2 * TorchCublasWorkspaceBytes(JobComputeCapability(job), job.memtune.env);
  f.layers = static_cast<int>(m.num_layers);
  f.compile = cfg.compile;
  f.compile_loss = cfg.compile_loss;
  f.float8 = cfg.float8;
  f.reshard_after_forward = cfg.reshard_after_forward;
  f.param_bytes = model::DtypeBytes(cfg.param_dtype);
  f.reduce_bytes = model::DtypeBytes(cfg.reduce_dtype);
  const std::int64_t dp = static_cast<std::int64_t>(dp_shard) * f.replicate;
  const std::int64_t per_step = job.train.micro_batch_size * dp;
  f.microbatches =
      per_step > 0 ? std::max<std::int64_t>(1, job.train.global_batch_size / per_step) : 1;
  f.tokens = job.train.micro_batch_size * m.seq_length / f.cp;  // this CP rank's chunks
  AddParams(job, f.tp, f);
  AddBlockActivations(job, f);
  f.accumulate_bytes = cfg.reduce_dtype != cfg.param_dtype ? f.reduce_bytes : f.param_bytes;
  f.pp = std::max(1, m.pipeline_model_parallel_size);
  f.virtual_stages = f.pp > 1 ? std::max(1, m.virtual_pipeline_model_parallel_size.value_or(1)) : 1;
  const int stages = f.pp * f.virtual_stages;
  if (stage < 0 || stage >= stages) {
    return InvalidInput(
        "pp_rank", "pipeline stage " + std::to_string(stage) + " of " + std::to_string(stages));
  }
  if (f.Pipelined()) {
    MEMTUNE_TRY(const std::vector<int> split, Fsdp2StageLayers(m.num_layers, stages));
    f.stage = stage;
    for (int s = 0; s < stage; ++s) f.first_layer += split[s];
    f.layers = split[stage];
    f.has_embedding = stage == 0;
    f.has_head = stage == stages - 1;
    f.schedule = cfg.pipeline_schedule;
    std::vector<Fsdp2Param> own;
    for (const auto& p : f.root_params) {
      const bool embedding = std::string_view(p.name) == "tok_embeddings.weight";
      if (embedding ? f.has_embedding : f.has_head) own.push_back(p);
    }
    f.root_params = std::move(own);
    // torch.distributed.pipelining Schedule1F1B: "Number of microbatches must be at least
    // the number of stages"; torchtitan splits local_batch_size / microbatch_size.
    if (f.schedule == model::Fsdp2PipelineSchedule::kInterleaved1F1B) {
      // ScheduleInterleaved1F1B: "microbatches must be a multiple of the rounds".
      const std::int64_t rounds = std::max<std::int64_t>(1, f.microbatches / f.pp);
      if (f.microbatches % rounds != 0) {
        return InvalidConfig("train.global_batch_size",
                             std::to_string(f.microbatches) +
                                 " micro-batches per step: PyTorch's Interleaved1F1B needs a "
                                 "multiple of max(1, micro-batches / pipeline stages) = " +
                                 std::to_string(rounds));
      }
    }
    if (f.schedule == model::Fsdp2PipelineSchedule::k1F1B && f.microbatches < f.pp) {
      return InvalidConfig("train.global_batch_size",
                           std::to_string(f.microbatches) + " micro-batches per step for " +
                               std::to_string(f.pp) +
                               " pipeline stages: PyTorch's 1F1B schedule needs at least one "
                               "per stage (raise global_batch_size or lower micro_batch_size)");
    }
  }
  return f;
}

}  // namespace memtune::tensors
