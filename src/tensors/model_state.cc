// Parameters, gradient buffers and optimizer state of one pipeline rank.
#include "tensors/model_state.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "tensors/lora_rank.h"

namespace memtune::tensors {
namespace {

using model::ParamPlacement;
using model::ParamTensor;
using model::TpSplit;

std::int64_t LocalElements(const ParamTensor& t, int tp, int ep, int etp) {
  if (t.expert) {
    const std::int64_t per_rank = t.Total() / std::max(1, ep);
    return t.tp_split == TpSplit::kReplicated ? per_rank : per_rank / std::max(1, etp);
  }
  return t.tp_split == TpSplit::kReplicated ? t.Total() : t.Total() / std::max(1, tp);
}

// SumList(list, fp8) of a tensor list for both values of `fp8` in one pass (each name
// tested once, no vector built): `all_hp` with every weight in params_dtype, `fp8` with TE
// linear weights in fp8 (only when `with_fp8`: the names are not read otherwise);
// `first_hp` sums the first tensor alone (the word embedding).
class ListSumSink final : public model::ParamTensorSink {
 public:
  // `wgrad`: also collects the tensors' placeholder shapes (AddWgradShape), `wgrad_bytes`
  // bytes per element.
  ListSumSink(int tp, int ep, int etp, bool with_fp8, WgradShapes* wgrad = nullptr,
              int wgrad_bytes = 2)
      : tp_(tp),
        ep_(ep),
        etp_(etp),
        with_fp8_(with_fp8),
        wgrad_(wgrad),
        wgrad_bytes_(wgrad_bytes) {}
  void Add(const ParamTensor& t) override {
    if (wgrad_ != nullptr) AddWgradShape(*wgrad_, t, tp_, etp_, wgrad_bytes_);
    const std::int64_t n = LocalElements(t, tp_, ep_, etp_);
    if (!t.is_buffer) {
      for (ListSums* s : {&all_hp, &fp8, &first_hp}) s->largest = std::max(s->largest, n);
    }
    AddTo(all_hp, t, n, false);
    if (with_fp8_) AddTo(fp8, t, n, IsTeLinearWeight(t));
    if (count_++ == 0) AddTo(first_hp, t, n, false);
  }
  const ListSums& Sums(bool fp8_weights) const { return fp8_weights ? fp8 : all_hp; }
  ListSums all_hp, fp8, first_hp;

 private:
  static void AddTo(ListSums& s, const ParamTensor& t, std::int64_t n, bool as_fp8) {
    if (t.is_buffer) {
      s.buffers += n;
    } else if (t.expert) {
      (as_fp8 ? s.expert_fp8 : s.expert_hp) += n;
    } else {
      (as_fp8 ? s.dense_fp8 : s.dense_hp) += n;
    }
  }
  int tp_, ep_, etp_;
  bool with_fp8_;
  WgradShapes* wgrad_;
  int wgrad_bytes_;
  int count_ = 0;
};

bool Targets(const model::PeftConfig& p, std::string_view module) {
  return std::find(p.target_modules.begin(), p.target_modules.end(), module) !=
         p.target_modules.end();
}

// LoRA adapter elements of one layer on one rank: dense (TP-sharded) adapters, and the
// adapters of a MoE layer's expert linears (expert params, sharded over expert TP).
struct LoraCounts {
  std::int64_t dense = 0, expert = 0;
};

// Bridge 067f987d peft/lora.py LoRA.transform and peft/utils.py. A targeted linear gets
// ParallelLinearAdapter: linear_in (in -> dim) + linear_out (dim -> out), both split over the
// linear's TP group, so dim * (in + out) / tp; DoRA adds a magnitude vector of `out`
// (megatron.md section 6). Names match by suffix, so a MoE layer's shared_experts.linear_fc1/2
// are ordinary TP adapters; the experts' grouped linears (is_expert_linear) use the expert
// TP group, the rank dim / moe_router_topk with normalize_moe_lora (get_effective_lora_dim;
// linear_fc1 rounded up to a multiple of ETP, align_expert_dim_for_tp), and:
// share_expert_adapters (default) one adapter for the rank's local experts;
// otherwise GroupedExpertLinearAdapter, [local_experts, ...] weights of the same shard
// shapes; experts_shared_outer_loras: fc1's linear_in and fc2's linear_out are ETP-split
// shared linears, the other side PackedPerExpertLinear [local_experts, out, in] unsplit.
LoraCounts LoraElements(const model::Job& job, bool moe_layer) {
  if (!job.peft) return {};
  const auto& m = job.model;
  const auto& p = *job.peft;
  const std::int64_t h = m.hidden_size, d = model::EffectiveKvChannels(m);
  const std::int64_t q = m.num_attention_heads * d, kv = model::EffectiveQueryGroups(m) * d;
  const std::int64_t glu = m.gated_linear_unit ? 2 : 1;
  const std::int64_t tp = std::max(1, m.tensor_model_parallel_size);
  const bool dora = p.method == model::PeftMethod::kDora;
  LoraCounts n;
  auto dense = [&](std::string_view name, std::int64_t in, std::int64_t out) {
    if (!Targets(p, name)) return;
    n.dense += (p.dim * (in + out) + (dora ? out : 0)) / tp;
  };
  dense("linear_qkv", h, q + 2 * kv);
  dense("linear_proj", q, h);
  if (!moe_layer) {
    const std::int64_t f = model::EffectiveFfnHiddenSize(m);
    dense("linear_fc1", h, glu * f);
    dense("linear_fc2", f, h);
    return n;
  }
  if (const std::int64_t fs = m.moe_shared_expert_intermediate_size.value_or(0); fs > 0) {
    dense("linear_fc1", h, glu * fs);
    dense("linear_fc2", fs, h);
  }
  const std::int64_t fe = model::EffectiveMoeFfnHiddenSize(m);
  const std::int64_t etp = std::max(1, model::ExpertTensorParallelSize(job));
  const std::int64_t local =
      m.num_moe_experts.value_or(0) / std::max(1, m.expert_model_parallel_size);
  const std::int64_t topk = std::max<std::int64_t>(1, m.moe_router_topk);
  auto expert = [&](std::string_view name, std::int64_t in, std::int64_t out, bool fc1) {
    if (!Targets(p, name)) return;
    const std::int64_t r = ExpertLoraRank(p, topk, etp, fc1);
    const std::int64_t a = r * in, b = r * out;  // linear_in, linear_out elements
    if (p.experts_shared_outer_loras) {
      n.expert += fc1 ? a / etp + local * b : local * a + b / etp;
    } else {
      n.expert += (p.share_expert_adapters ? 1 : local) * (a + b) / etp;
    }
    if (dora) n.expert += out / etp;
  };
  expert("linear_fc1", h, glu * fe, true);
  expert("linear_fc2", fe, h, false);
  return n;
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
  if (!frozen) r.largest_tensor = std::max(r.largest_tensor, s.largest);
}

}  // namespace

// (strstr: the names are NUL-terminated literals, searched once each per estimate.)
bool IsTeLinearWeight(const model::ParamTensor& t) {
  return !t.is_norm && !t.is_bias && !t.is_buffer && std::strstr(t.name, "linear_") != nullptr &&
         std::strstr(t.name, "router") == nullptr;
}

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
  const bool fp8_params = m.fp8 != model::Fp8Format::kNone && (m.fp8_param || m.fp8_param_gather);
  ParamCatalog c;
  for (int moe = 0; moe < 2; ++moe) {
    if (moe && m.num_moe_experts.value_or(0) <= 0) break;
    ListSumSink layer(tp, ep, etp, true, &c.wgrad_layer[moe], model::DtypeBytes(m.params_dtype));
    model::AddTransformerLayerParameters(m, moe == 1, layer);
    c.layer[moe][0] = layer.Sums(false);
    c.layer[moe][1] = layer.Sums(fp8_params);
    c.te_linear[moe] = layer.fp8.dense_fp8 + layer.fp8.expert_fp8;
    const LoraCounts lora = LoraElements(job, moe == 1);
    c.lora[moe] = lora.dense;
    c.lora_expert[moe] = lora.expert;
  }
  ListSumSink embedding(tp, ep, etp, false);
  model::AddEmbeddingParameters(m, vocab, embedding);
  c.embedding = embedding.Sums(false);
  c.word_embedding = embedding.first_hp;
  ListSumSink output(tp, ep, etp, false);
  model::AddOutputParameters(m, vocab, output);
  c.output = output.Sums(false);
  if (m.mtp_num_layers.value_or(0) > 0) {
    ListSumSink mtp(tp, ep, etp, fp8_params, &c.wgrad_mtp, model::DtypeBytes(m.params_dtype));
    model::AddMtpExtraParameters(m, mtp);
    c.mtp_extra = mtp.Sums(fp8_params);
  }
  // Without experts every layer is dense: the pattern stays empty (IsMoeLayer reads past
  // its end as dense) rather than allocating num_layers falses on every estimate.
  if (m.num_moe_experts.value_or(0) > 0) c.moe_pattern = model::MoeLayerPattern(m);
  c.param_layout = UsesParamLayout(job);
  if (c.param_layout) {
    c.layout = MakeLayoutLists(job);
    // A model of more tensors than kMaxLayoutTensors keeps the layer-granular model: the
    // per-tensor trace would take minutes (100,000 experts per layer, say).
    if (LayoutTensorCount(job, c.layout) > kMaxLayoutTensors) {
      c.param_layout = false;
      c.layout = LayoutLists{};
    }
  }
  return c;
}

RankParams CountRankParams(const model::Job& job, const ParamCatalog& catalog,
                           const estimate::StageLayout& stage, int pp_size) {
  return CountRankParams(job, catalog, std::span<const estimate::ModelChunk>(stage.chunks),
                         pp_size);
}

RankParams CountRankParams(const model::Job& job, const ParamCatalog& catalog,
                           std::span<const estimate::ModelChunk> chunks, int pp_size) {
  const auto& m = job.model;
  const bool frozen = job.peft.has_value();
  RankParams r;
  std::int64_t count[2][2] = {};  // layers of each kind, [moe][fp8]
  const bool uniform = m.num_moe_experts.value_or(0) <= 0 && !m.first_last_layers_bf16;
  auto add_layer = [&](int layer) {
    if (uniform) {
      ++count[0][1];
      return;
    }
    const bool moe =
        layer < static_cast<int>(catalog.moe_pattern.size()) && catalog.moe_pattern[layer];
    ++count[moe][IsBf16Layer(m, layer) ? 0 : 1];
  };
  for (const auto& chunk : chunks) {
    if (uniform) {  // hot path: dense layers, none kept in bf16
      count[0][1] += std::max(0, chunk.num_layers);
    } else {
      for (int i = 0; i < chunk.num_layers; ++i) add_layer(chunk.first_layer + i);
    }
    for (int i = 0; i < chunk.num_mtp_layers; ++i) {
      add_layer(static_cast<int>(m.num_layers) + i);
      Add(r, catalog.mtp_extra, 1, frozen);
    }
    if (chunk.has_embedding) Add(r, catalog.embedding, 1, frozen);
    if (chunk.has_output) {
      Add(r, catalog.output, 1, frozen);
      // Tied embeddings with PP > 1: the last stage keeps its own copy of the word
      // embedding as the output weight (MCore LanguageModule.setup_embeddings_and_output_layer).
      if (m.share_embeddings_and_output_weights && pp_size > 1)
        Add(r, catalog.word_embedding, 1, frozen);
    }
  }
  for (int moe = 0; moe < 2; ++moe) {
    for (int fp8 = 0; fp8 < 2; ++fp8) {
      const std::int64_t n = count[moe][fp8];
      if (n == 0) continue;
      Add(r, catalog.layer[moe][fp8], n, frozen);
      r.dense_hp += catalog.lora[moe] * n;
      r.expert_hp += catalog.lora_expert[moe] * n;
      if (m.fp8 != model::Fp8Format::kNone && fp8 == 1) r.te_linear += catalog.te_linear[moe] * n;
      r.largest_layer = std::max(r.largest_layer, catalog.layer[moe][0].Total());
    }
  }
  return r;
}

ModelStateRules MakeModelStateRules(const model::Job& job, bool fp8_needs_transpose) {
  const auto& m = job.model;
  const auto& opt = job.optimizer;
  const auto& ddp = job.ddp;
  const int cp = std::max(1, m.context_parallel_size);
  const int instances = std::max(1, ddp.num_distributed_optimizer_instances);
  const bool fsdp = ddp.use_megatron_fsdp;
  const model::ShardingStrategy strategy = ddp.data_parallel_sharding_strategy;
  const bool sharded_opt =
      opt.use_distributed_optimizer || (fsdp && strategy != model::ShardingStrategy::kNoShard);
  ModelStateRules g;
  // MCore optimizer/__init__.py: the distributed optimizer shards dense state over the
  // (intra-instance) DP x CP group and expert state over the expert-DP group.
  g.dense_shard = sharded_opt ? std::max<std::int64_t>(
                                    1, std::int64_t{model::DataParallelSize(job)} * cp / instances)
                              : 1;
  g.expert_shard =
      sharded_opt ? std::max<std::int64_t>(1, model::ExpertDataParallelSize(job) / instances) : 1;
  g.shard_grads = fsdp && (strategy == model::ShardingStrategy::kOptimGrads ||
                           strategy == model::ShardingStrategy::kOptimGradsParams);
  g.shard_params = fsdp && strategy == model::ShardingStrategy::kOptimGradsParams;
  g.fsdp = fsdp;
  g.pbytes = model::DtypeBytes(m.params_dtype);
  g.fp8 = m.fp8 != model::Fp8Format::kNone;
  g.fp8_params = g.fp8 && (m.fp8_param || m.fp8_param_gather);
  g.fp8_needs_transpose = fp8_needs_transpose;
  // param_and_grad_buffer.py group_params_for_buffers: the grad buffer is fp32 with
  // grad_reduce_in_fp32, else the parameter's logical dtype; requires_grad params only.
  g.gbytes = (ddp.grad_reduce_in_fp32 || m.params_dtype == model::Dtype::kFp32) ? 4 : g.pbytes;
  g.aware = opt.use_precision_aware_optimizer;
  const bool needs_master = m.params_dtype != model::Dtype::kFp32 || g.fp8_params;
  g.master = needs_master ? (g.aware ? model::DtypeBytes(opt.main_params_dtype) : 4) : 0;
  const bool adam = opt.optimizer == model::Optimizer::kAdam;
  g.m1 = adam ? (g.aware ? model::DtypeBytes(opt.exp_avg_dtype) : 4) : 0;
  g.m2 = adam ? (g.aware ? model::DtypeBytes(opt.exp_avg_sq_dtype) : 4) : 0;
  g.adam = adam;
  g.impl = job.memtune.optimizer_implementation;
  g.dist_opt = opt.use_distributed_optimizer;
  g.on_gpu = opt.optimizer_cpu_offload ? 1.0 - opt.optimizer_offload_fraction : 1.0;
  // distrib_optimizer.py _copy_main_params_to_model_params: with fp8_param_gather the step
  // ends in quantize_param_shard over every fp8 parameter of the optimizer, unless a
  // precision-aware optimizer does the copy itself (optimizer_config.py
  // use_precision_aware_optimizer_no_fp8_or_ds_fp8). TE quantize_master_weights
  // (pytorch/tensor/utils.py, "master_weight = master_weight.to(model_weight.dtype)",
  // TE >= 2.2) first casts each fp32 main shard to the parameter's nominal dtype and keeps
  // every copy in a list until the fp8 casts run, so all of them are alive at once.
  const bool aware_copies =
      g.aware &&
      (opt.main_params_dtype != model::Dtype::kFp32 || m.fp8_recipe == model::Fp8Recipe::kNone ||
       m.fp8_recipe == model::Fp8Recipe::kDelayed || opt.optimizer_cpu_offload);
  g.fp8_cast_copies =
      g.fp8 && m.fp8_param_gather && opt.use_distributed_optimizer && !fsdp && !aware_copies;
  return g;
}

ModelStateBytes ComputeModelState(const model::Job& job, const RankParams& p,
                                  bool fp8_needs_transpose) {
  return ComputeModelState(MakeModelStateRules(job, fp8_needs_transpose), p);
}

ModelStateBytes ComputeModelState(const ModelStateRules& g, const RankParams& p) {
  const std::int64_t dense_shard = g.dense_shard, expert_shard = g.expert_shard;
  const bool shard_grads = g.shard_grads, shard_params = g.shard_params;
  const int pbytes = g.pbytes, gbytes = g.gbytes;
  ModelStateBytes s;
  auto shard = [](std::int64_t bytes, std::int64_t n, bool on) { return on ? bytes / n : bytes; };
  const std::int64_t dense_hp = p.dense_hp + p.dense_frozen_hp,
                     dense_fp8 = p.dense_fp8 + p.dense_frozen_fp8;
  const std::int64_t exp_hp = p.expert_hp + p.expert_frozen_hp,
                     exp_fp8 = p.expert_fp8 + p.expert_frozen_fp8;
  s.params_hp = shard(dense_hp * pbytes, dense_shard, shard_params) +
                shard(exp_hp * pbytes, expert_shard, shard_params);
  s.params_fp8 =
      shard(dense_fp8, dense_shard, shard_params) + shard(exp_fp8, expert_shard, shard_params);
  // TE Float8Tensor.update_usage / post_all_gather_processing: pre-Blackwell GPUs keep a
  // transposed fp8 copy of every fp8 weight. Without fp8 params TE caches the fp8 weight
  // (and its transpose) per module across micro-batches (module/base.py quantize_weight).
  if (g.fp8_params) {
    s.fp8_transpose = g.fp8_needs_transpose ? s.params_fp8 : 0;
  } else if (g.fp8) {
    s.fp8_transpose = p.te_linear * (g.fp8_needs_transpose ? 2 : 1);
  }
  s.buffers = p.buffers_fp32 * 4;
  s.grads = shard(p.DenseTrainable() * gbytes, dense_shard, shard_grads) +
            shard(p.ExpertTrainable() * gbytes, expert_shard, shard_grads);
  const std::int64_t dense_sh = p.DenseTrainable() / dense_shard,
                     exp_sh = p.ExpertTrainable() / expert_shard;
  auto opt_bytes = [&](int b) {
    return static_cast<std::int64_t>((dense_sh + exp_sh) * b * g.on_gpu);
  };
  s.main_params = opt_bytes(g.master);
  s.exp_avg = opt_bytes(g.m1);
  s.exp_avg_sq = opt_bytes(g.m2);
  // distrib_optimizer.py _copy_model_grads_to_main_grads: shard_main_param.grad =
  // shard_model_grad.float() allocates fp32 copies when the grad buffer is not fp32.
  if (gbytes != 4 && !g.aware && !g.fsdp) s.step_transient = opt_bytes(4);
  // PyTorch's AdamW (torch/optim/adam.py, non-capturable): _multi_tensor_adam makes
  // exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs), one new tensor per parameter of the
  // group, all alive until the update (the weight-decay group holds all but the norms and
  // biases: counted as every parameter); _single_tensor_adam computes
  // (exp_avg_sq.sqrt() / bias_correction2_sqrt) per parameter while the previous one's denom
  // is still bound: three of the largest parameter's shard at once.
  if (g.adam && g.impl == model::OptimizerImpl::kForeach) s.step_workspace = opt_bytes(g.m2);
  if (g.adam && g.impl == model::OptimizerImpl::kForLoop) {
    s.step_workspace =
        static_cast<std::int64_t>(3 * g.m2 * (p.largest_tensor / dense_shard) * g.on_gpu);
  }
  if (g.fp8_cast_copies) {
    s.fp8_cast_copy = static_cast<std::int64_t>(
        (p.dense_fp8 / dense_shard + p.expert_fp8 / expert_shard) * pbytes * g.on_gpu);
  }
  if (shard_params) s.fsdp_gather = 2 * p.largest_layer * pbytes;  // current + prefetched
  const std::int64_t exp_total = exp_hp + exp_fp8;
  if (exp_total > 0) {
    s.expert = shard(exp_hp * pbytes, expert_shard, shard_params) +
               shard(exp_fp8, expert_shard, shard_params) +
               shard(p.ExpertTrainable() * gbytes, expert_shard, shard_grads) +
               static_cast<std::int64_t>(exp_sh * (g.master + g.m1 + g.m2) * g.on_gpu);
    if (g.fp8_params && g.fp8_needs_transpose) {
      s.expert += shard(exp_fp8, expert_shard, shard_params);
    }
  }
  return s;
}

ModelStateBytes ComputeModelState(const ModelStateRules& g, const RankParams& p,
                                  const OptLayout& layout) {
  ModelStateBytes s = ComputeModelState(g, p);
  const auto& buf = layout.buffer_elements;
  const auto& sh = layout.shard_elements;
  // param_and_grad_buffer.py: with the distributed optimizer the parameters live in the
  // padded param buffers; the grad buffers are padded alike (unpadded without it, as the
  // element counts already say). fp8_transpose stays per parameter (unpadded).
  if (g.dist_opt) {
    s.params_hp = (buf[0][0] + buf[1][0]) * g.pbytes;
    s.params_fp8 = buf[0][1] + buf[1][1];
  }
  s.grads = (buf[0][0] + buf[0][1] + buf[1][0] + buf[1][1]) * g.gbytes;
  const std::int64_t dense = sh[0][0] + sh[0][1], expert = sh[1][0] + sh[1][1];
  s.main_params = (dense + expert) * g.master;
  s.exp_avg = (dense + expert) * g.m1;
  s.exp_avg_sq = (dense + expert) * g.m2;
  s.step_transient = g.gbytes != 4 ? (dense + expert) * 4 : 0;
  if (g.adam && g.impl == model::OptimizerImpl::kForeach)
    s.step_workspace = (dense + expert) * g.m2;
  if (g.fp8_cast_copies) s.fp8_cast_copy = (sh[0][1] + sh[1][1]) * g.pbytes;
  if (s.expert > 0) {
    const std::int64_t fp8_t = g.fp8_params && g.fp8_needs_transpose ? p.expert_fp8 : 0;
    s.expert =
        (g.dist_opt ? buf[1][0] * g.pbytes + buf[1][1] : p.expert_hp * g.pbytes + p.expert_fp8) +
        fp8_t + (buf[1][0] + buf[1][1]) * g.gbytes + expert * (g.master + g.m1 + g.m2);
  }
  return s;
}

}  // namespace memtune::tensors
