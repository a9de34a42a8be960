// Parameters, gradient buffers and optimizer state of one pipeline rank.
#include "model_state.h"

#include <algorithm>
#include <string_view>

namespace memtune::estimate::internal {
namespace {

using model::ParamPlacement;
using model::ParamTensor;
using model::TpSplit;

// Transformer Engine linear weights: the only tensors TE stores in fp8 with fp8 params
// (MCore fp8_utils / TE module weights; embeddings, norms, router and output layer stay
// in params_dtype).
bool IsTeLinearWeight(const ParamTensor& t) {
  const std::string_view name = t.name;
  return !t.is_norm && !t.is_bias && !t.is_buffer && name.find("linear_") != std::string_view::npos &&
         name.find("router") == std::string_view::npos;
}

std::int64_t LocalElements(const ParamTensor& t, int tp, int ep, int etp) {
  if (t.expert) {
    const std::int64_t per_rank = t.Total() / std::max(1, ep);
    return t.tp_split == TpSplit::kReplicated ? per_rank : per_rank / std::max(1, etp);
  }
  return t.tp_split == TpSplit::kReplicated ? t.Total() : t.Total() / std::max(1, tp);
}

ListSums SumList(const std::vector<ParamTensor>& list, int tp, int ep, int etp, bool fp8) {
  ListSums s;
  for (const auto& t : list) {
    const std::int64_t n = LocalElements(t, tp, ep, etp);
    if (t.is_buffer) { s.buffers += n; continue; }
    const bool as_fp8 = fp8 && IsTeLinearWeight(t);
    if (t.expert) (as_fp8 ? s.expert_fp8 : s.expert_hp) += n;
    else (as_fp8 ? s.dense_fp8 : s.dense_hp) += n;
  }
  return s;
}

bool Targets(const model::PeftConfig& p, std::string_view module) {
  return std::find(p.target_modules.begin(), p.target_modules.end(), module) != p.target_modules.end();
}

// Bridge peft/utils.py ParallelLinearAdapter: linear_in + linear_out = dim * (in + out)
// per targeted linear, sharded over TP (megatron.md §6); DoRA adds a magnitude vector.
std::int64_t LoraElements(const model::Job& job, bool moe_layer) {
  if (!job.peft) return 0;
  const auto& m = job.model;
  const auto& p = *job.peft;
  const std::int64_t h = m.hidden_size, d = model::EffectiveKvChannels(m);
  const std::int64_t q = m.num_attention_heads * d, kv = model::EffectiveQueryGroups(m) * d;
  const std::int64_t f = moe_layer ? model::EffectiveMoeFfnHiddenSize(m) : model::EffectiveFfnHiddenSize(m);
  const std::int64_t glu = m.gated_linear_unit ? 2 : 1;
  std::int64_t elements = 0, outs = 0;
  auto add = [&](std::string_view name, std::int64_t in, std::int64_t out) {
    if (!Targets(p, name)) return;
    elements += p.dim * (in + out);
    outs += out;
  };
  add("linear_qkv", h, q + 2 * kv);
  add("linear_proj", q, h);
  add("linear_fc1", h, glu * f);
  add("linear_fc2", f, h);
  if (p.method == "dora") elements += outs;
  return elements / std::max(1, m.tensor_model_parallel_size);
}

void Add(RankParams& r, const ListSums& s, std::int64_t times, bool frozen) {
  if (frozen) {
    r.dense_frozen_hp += s.dense_hp * times;
    r.dense_frozen_fp8 += s.dense_fp8 * times;
    r.expert_frozen_hp += s.expert_hp * times;
    r.expert_frozen_fp8 += s.expert_fp8 * times;
  } else {
    r.dense_hp += s.dense_hp * times;
    r.dense_fp8 += s.dense_fp8 * times;
    r.expert_hp += s.expert_hp * times;
    r.expert_fp8 += s.expert_fp8 * times;
  }
  r.buffers_fp32 += s.buffers * times;
}

}  // namespace

bool IsBf16Layer(const model::ModelConfig& m, int layer) {
  if (!m.first_last_layers_bf16) return false;
  return layer < m.num_layers_at_start_in_bf16 ||
         (layer < m.num_layers && layer >= m.num_layers - m.num_layers_at_end_in_bf16);
}

ParamCatalog MakeParamCatalog(const model::Job& job) {
  const auto& m = job.model;
  const std::int64_t vocab = model::PaddedVocabSize(job);
  const int tp = m.tensor_model_parallel_size, ep = m.expert_model_parallel_size;
  const int etp = model::ExpertTensorParallelSize(job);
  const bool fp8_params = !m.fp8.empty() && (m.fp8_param || m.fp8_param_gather);
  ParamCatalog c;
  for (int moe = 0; moe < 2; ++moe) {
    if (moe && m.num_moe_experts.value_or(0) <= 0) break;
    const auto list = model::TransformerLayerParameters(m, moe == 1);
    c.layer[moe][0] = SumList(list, tp, ep, etp, false);
    c.layer[moe][1] = SumList(list, tp, ep, etp, fp8_params);
    const ListSums linear = SumList(list, tp, ep, etp, true);
    c.te_linear[moe] = linear.dense_fp8 + linear.expert_fp8;
    c.lora[moe] = LoraElements(job, moe == 1);
  }
  const auto embedding = model::EmbeddingParameters(m, vocab);
  c.embedding = SumList(embedding, tp, ep, etp, false);
  if (!embedding.empty()) c.word_embedding = SumList({embedding.front()}, tp, ep, etp, false);
  c.output = SumList(model::OutputParameters(m, vocab), tp, ep, etp, false);
  if (m.mtp_num_layers.value_or(0) > 0) {
    c.mtp_extra = SumList(model::MtpExtraParameters(m), tp, ep, etp, fp8_params);
  }
  c.moe_pattern = model::MoeLayerPattern(m);
  return c;
}

RankParams CountRankParams(const model::Job& job, const ParamCatalog& catalog,
                           const StageLayout& stage, int pp_size) {
  const auto& m = job.model;
  const bool frozen = job.peft.has_value();
  RankParams r;
  std::int64_t count[2][2] = {};  // layers of each kind, [moe][fp8]
  const bool uniform = m.num_moe_experts.value_or(0) <= 0 && !m.first_last_layers_bf16;
  auto add_layer = [&](int layer) {
    if (uniform) {  // hot path: dense layers, none kept in bf16
      ++count[0][1];
      return;
    }
    const bool moe = layer < static_cast<int>(catalog.moe_pattern.size()) && catalog.moe_pattern[layer];
    ++count[moe][IsBf16Layer(m, layer) ? 0 : 1];
  };
  for (const auto& chunk : stage.chunks) {
    for (int i = 0; i < chunk.num_layers; ++i) add_layer(chunk.first_layer + i);
    for (int i = 0; i < chunk.num_mtp_layers; ++i) {
      add_layer(static_cast<int>(m.num_layers) + i);
      Add(r, catalog.mtp_extra, 1, frozen);
    }
    if (chunk.has_embedding) Add(r, catalog.embedding, 1, frozen);
    if (chunk.has_output) {
      Add(r, catalog.output, 1, frozen);
      // Tied embeddings with PP > 1: the last stage keeps its own copy of the word
      // embedding as the output weight (MCore LanguageModule.setup_embeddings_and_output_layer).
      if (m.share_embeddings_and_output_weights && pp_size > 1) Add(r, catalog.word_embedding, 1, frozen);
    }
  }
  for (int moe = 0; moe < 2; ++moe) {
    for (int fp8 = 0; fp8 < 2; ++fp8) {
      const std::int64_t n = count[moe][fp8];
      if (n == 0) continue;
      Add(r, catalog.layer[moe][fp8], n, frozen);
      r.dense_hp += catalog.lora[moe] * n;
      if (!m.fp8.empty() && fp8 == 1) r.te_linear += catalog.te_linear[moe] * n;
      r.largest_layer = std::max(r.largest_layer, catalog.layer[moe][0].Total());
    }
  }
  return r;
}

ModelStateBytes ComputeModelState(const model::Job& job, const RankParams& p,
                                  bool fp8_needs_transpose) {
  const auto& m = job.model;
  const auto& opt = job.optimizer;
  const auto& ddp = job.ddp;
  const int cp = std::max(1, m.context_parallel_size);
  const int instances = std::max(1, ddp.num_distributed_optimizer_instances);
  const bool fsdp = ddp.use_megatron_fsdp;
  const std::string& strategy = ddp.data_parallel_sharding_strategy;
  const bool sharded_opt = opt.use_distributed_optimizer || (fsdp && strategy != "no_shard");
  // MCore optimizer/__init__.py: the distributed optimizer shards dense state over the
  // (intra-instance) DP x CP group and expert state over the expert-DP group.
  const std::int64_t dense_shard =
      sharded_opt ? std::max<std::int64_t>(1, std::int64_t{model::DataParallelSize(job)} * cp / instances) : 1;
  const std::int64_t expert_shard =
      sharded_opt ? std::max<std::int64_t>(1, model::ExpertDataParallelSize(job) / instances) : 1;
  const bool shard_grads = fsdp && (strategy == "optim_grads" || strategy == "optim_grads_params");
  const bool shard_params = fsdp && strategy == "optim_grads_params";

  const int pbytes = model::DtypeBytes(m.params_dtype);
  const bool fp8 = !m.fp8.empty();
  const bool fp8_params = fp8 && (m.fp8_param || m.fp8_param_gather);
  ModelStateBytes s;
  auto shard = [](std::int64_t bytes, std::int64_t n, bool on) { return on ? bytes / n : bytes; };
  const std::int64_t dense_hp = p.dense_hp + p.dense_frozen_hp, dense_fp8 = p.dense_fp8 + p.dense_frozen_fp8;
  const std::int64_t exp_hp = p.expert_hp + p.expert_frozen_hp, exp_fp8 = p.expert_fp8 + p.expert_frozen_fp8;
  s.params_hp = shard(dense_hp * pbytes, dense_shard, shard_params) + shard(exp_hp * pbytes, expert_shard, shard_params);
  s.params_fp8 = shard(dense_fp8, dense_shard, shard_params) + shard(exp_fp8, expert_shard, shard_params);
  // TE Float8Tensor.update_usage / post_all_gather_processing: pre-Blackwell GPUs keep a
  // transposed fp8 copy of every fp8 weight. Without fp8 params TE caches the fp8 weight
  // (and its transpose) per module across micro-batches (module/base.py quantize_weight).
  if (fp8_params) {
    s.fp8_transpose = fp8_needs_transpose ? s.params_fp8 : 0;
  } else if (fp8) {
    s.fp8_transpose = p.te_linear * (fp8_needs_transpose ? 2 : 1);
  }
  s.buffers = p.buffers_fp32 * 4;
  // param_and_grad_buffer.py group_params_for_buffers: the grad buffer is fp32 with
  // grad_reduce_in_fp32, else the parameter's logical dtype; requires_grad params only.
  const int gbytes = (ddp.grad_reduce_in_fp32 || m.params_dtype == model::Dtype::kFp32) ? 4 : pbytes;
  s.grads = shard(p.DenseTrainable() * gbytes, dense_shard, shard_grads) +
            shard(p.ExpertTrainable() * gbytes, expert_shard, shard_grads);
  const bool aware = opt.use_precision_aware_optimizer;
  const bool needs_master = m.params_dtype != model::Dtype::kFp32 || fp8_params;
  const int master = needs_master ? (aware ? model::DtypeBytes(opt.main_params_dtype) : 4) : 0;
  const bool adam = opt.optimizer == "adam";
  const int m1 = adam ? (aware ? model::DtypeBytes(opt.exp_avg_dtype) : 4) : 0;
  const int m2 = adam ? (aware ? model::DtypeBytes(opt.exp_avg_sq_dtype) : 4) : 0;
  const double on_gpu = opt.optimizer_cpu_offload ? 1.0 - opt.optimizer_offload_fraction : 1.0;
  const std::int64_t dense_sh = p.DenseTrainable() / dense_shard, exp_sh = p.ExpertTrainable() / expert_shard;
  auto opt_bytes = [&](int b) { return static_cast<std::int64_t>((dense_sh + exp_sh) * b * on_gpu); };
  s.main_params = opt_bytes(master);
  s.exp_avg = opt_bytes(m1);
  s.exp_avg_sq = opt_bytes(m2);
  // distrib_optimizer.py _copy_model_grads_to_main_grads: shard_main_param.grad =
  // shard_model_grad.float() allocates fp32 copies when the grad buffer is not fp32.
  if (gbytes != 4 && !aware && !fsdp) s.step_transient = opt_bytes(4);
  if (shard_params) s.fsdp_gather = 2 * p.largest_layer * pbytes;  // current + prefetched
  const std::int64_t exp_total = exp_hp + exp_fp8;
  if (exp_total > 0) {
    s.expert = shard(exp_hp * pbytes, expert_shard, shard_params) + shard(exp_fp8, expert_shard, shard_params) +
               shard(p.ExpertTrainable() * gbytes, expert_shard, shard_grads) +
               static_cast<std::int64_t>(exp_sh * (master + m1 + m2) * on_gpu);
    if (fp8_params && fp8_needs_transpose) s.expert += shard(exp_fp8, expert_shard, shard_params);
  }
  return s;
}

}  // namespace memtune::estimate::internal
