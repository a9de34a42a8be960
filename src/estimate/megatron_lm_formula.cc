// Megatron-LM theoretical_memory_usage.py formulas, in upstream operation order.
// Source: NVIDIA/Megatron-LM @ d98e8a64 megatron/training/theoretical_memory_usage.py,
// restated in docs/estimator-compat.md and docs/megatron.md §2.
#include "estimate/megatron_lm_formula.h"

#include <string>

#include "estimate/compat_common.h"

namespace memtune::estimate::mlm {
namespace {

using compat::kBytesPerUpstreamMb;

// Layer counts as upstream derives them from moe_layer_freq (sums of the raw flags).
struct LayerCounts {
  std::int64_t dense = 0;
  std::int64_t moe = 0;
  std::int64_t mtp_dense = 0;
  std::int64_t mtp_moe = 0;
};

std::string PythonListRepr(const std::vector<int>& values) {
  std::string text = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(values[i]);
  }
  return text + "]";
}

Result<LayerCounts> CountLayers(const Args& args) {
  std::vector<int> pattern(static_cast<std::size_t>(args.num_layers), 0);
  if (args.num_experts.has_value()) {
    if (args.moe_layer_freq_is_list) {
      if (static_cast<std::int64_t>(args.moe_layer_freq.size()) != args.num_layers) {
        // Upstream's assert message, verbatim in content.
        return InvalidConfig(
            "model.moe_layer_freq",
            "Invalid length of moe_layer_pattern: " + std::to_string(args.moe_layer_freq.size()) +
                ", expected " + std::to_string(args.num_layers) +
                ", current moe layer pattern: " + PythonListRepr(args.moe_layer_freq));
      }
      pattern = args.moe_layer_freq;
    } else {
      const int freq = args.moe_layer_freq.empty() ? 0 : args.moe_layer_freq.front();
      if (freq <= 0)
        return InvalidConfig("model.moe_layer_freq", "moe_layer_freq must be positive");
      for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = (i % freq == 0) ? 1 : 0;
    }
  }
  LayerCounts counts;
  for (int flag : pattern) counts.moe += flag;
  counts.dense = args.num_layers - counts.moe;
  if (args.mtp_num_layers.has_value()) {
    const std::int64_t last_is_moe = pattern.back();
    counts.mtp_moe = last_is_moe * *args.mtp_num_layers;
    counts.mtp_dense = (1 - last_is_moe) * *args.mtp_num_layers;
  }
  return counts;
}

// Per-layer parameter counts (upstream's *_params variables).
struct LayerParams {
  double attention = 0;
  double dense_mlp = 0;
  double shared_expert = 0;
  double routed_expert = 0;
  double latent_projection = 0;
  double layernorm = 0;
  double router = 0;
  double shared_expert_gate = 0;
  double norm_size = 0;
};

double AttentionParams(const Args& a, double norm) {
  const double h = static_cast<double>(a.hidden_size);
  const double heads = static_cast<double>(a.num_attention_heads);
  if (!a.multi_latent_attention) {
    const double ratio = static_cast<double>(a.kv_channels * a.num_attention_heads) / h;
    const double groups = static_cast<double>(a.num_query_groups);
    return 2.0 * h * h * ((1.0 + groups / heads) * ratio);
  }
  const double qk = static_cast<double>(a.qk_head_dim);
  const double pos = static_cast<double>(a.qk_pos_emb_head_dim);
  const double v = static_cast<double>(a.v_head_dim);
  const double q_term = a.q_lora_rank.has_value()
                            ? static_cast<double>(*a.q_lora_rank) * (h + heads * (qk + pos) + norm)
                            : h * heads * (qk + pos);
  return q_term + static_cast<double>(a.kv_lora_rank) * (h + heads * (qk + v) + norm) + h * pos +
         (heads * v) * h;
}

LayerParams ComputeLayerParams(const Args& a) {
  LayerParams p;
  const double h = static_cast<double>(a.hidden_size);
  const bool moe = a.num_experts.has_value();
  const double experts = moe ? static_cast<double>(*a.num_experts) : 1.0;
  const double gated = a.swiglu ? 1.5 : 1.0;
  const double shared_ffn = static_cast<double>(a.moe_shared_expert_intermediate_size.value_or(0));
  const double moe_ffn = moe ? static_cast<double>(a.moe_ffn_hidden_size) : 0.0;
  const double routed_width =
      a.moe_latent_size.has_value() ? static_cast<double>(*a.moe_latent_size) : h;
  // 9ad59065 (Megatron-Core 0.16): "RMSNorm does not have bias, but LayerNorm has".
  p.norm_size = a.legacy_norm_count ? 2.0 : a.rms_norm ? 1.0 : 2.0;
  p.attention = AttentionParams(a, a.legacy_norm_count ? 1.0 : p.norm_size);
  p.dense_mlp = 2.0 * h * static_cast<double>(a.ffn_hidden_size) * gated;
  p.shared_expert = 2.0 * h * shared_ffn * gated;
  p.routed_expert = 2.0 * routed_width * moe_ffn * experts * gated;
  if (moe && a.moe_latent_size.has_value()) {
    p.latent_projection = 2.0 * h * static_cast<double>(*a.moe_latent_size);
  }
  p.layernorm = 2.0 * h * p.norm_size;
  if (moe) p.router = h * experts + (a.add_bias_linear ? experts : 0.0);
  if (shared_ffn > 0 && a.moe_shared_expert_gate) p.shared_expert_gate = h;
  return p;
}

double BytesPerParameter(const Args& a, std::int64_t shard_size) {
  if (!a.use_distributed_optimizer) return 18.0;
  return 6.0 + 12.0 / static_cast<double>(shard_size);
}

void CountTotals(const LayerParams& p, const LayerCounts& n, double embedding, double final_norm,
                 bool untied, WeightAndOptimizer& w) {
  const double dense_layer = p.attention + p.dense_mlp + p.layernorm;
  const double moe_layer = p.attention + p.shared_expert + p.routed_expert + p.latent_projection +
                           p.layernorm + p.router + p.shared_expert_gate;
  w.transformer_block_parameters = dense_layer * static_cast<double>(n.dense) +
                                   moe_layer * static_cast<double>(n.moe) + final_norm;
  w.mtp_block_parameters =
      dense_layer * static_cast<double>(n.mtp_dense) + moe_layer * static_cast<double>(n.mtp_moe);
  w.embedding_parameters = untied ? 2.0 * embedding : embedding;
  w.total_parameters =
      w.transformer_block_parameters + w.mtp_block_parameters + w.embedding_parameters;
}

}  // namespace

Result<WeightAndOptimizer> ComputeWeightAndOptimizerMemory(const Args& a) {
  if (a.multi_latent_attention && a.group_query_attention) {
    return InvalidConfig("model.num_query_groups",
                         "multi_latent_attention requires group_query_attention off "
                         "(num_query_groups must equal num_attention_heads)");
  }
  MEMTUNE_TRY(const LayerCounts n, CountLayers(a));
  const LayerParams p = ComputeLayerParams(a);
  const double h = static_cast<double>(a.hidden_size);
  const double embedding = h * static_cast<double>(a.padded_vocab_size);
  const double final_norm = p.norm_size * h;
  WeightAndOptimizer w;
  CountTotals(p, n, embedding, final_norm, a.untie_embeddings_and_output_weights, w);

  const auto nd = static_cast<double>(n.dense), nm = static_cast<double>(n.moe);
  const auto md = static_cast<double>(n.mtp_dense), mm = static_cast<double>(n.mtp_moe);
  const double moe_replicated = p.layernorm + p.latent_projection + p.router + p.shared_expert_gate;
  const double tp_block = (p.attention + p.dense_mlp) * nd + (p.attention + p.shared_expert) * nm;
  const double rep_block = p.layernorm * nd + moe_replicated * nm + final_norm;
  const double exp_block = p.routed_expert * nm;
  const double tp_mtp = (p.attention + p.dense_mlp) * md + (p.attention + p.shared_expert) * mm;
  const double rep_mtp = p.layernorm * md + moe_replicated * mm;
  const double exp_mtp = p.routed_expert * mm;

  const auto pp = static_cast<double>(a.pipeline_model_parallel_size);
  const auto tp = static_cast<double>(a.tensor_model_parallel_size);
  const auto etp = static_cast<double>(a.expert_tensor_parallel_size);
  const auto ep = static_cast<double>(a.expert_model_parallel_size);
  w.tp_sharded_on_most_loaded = (tp_block / pp + tp_mtp + embedding) / tp;
  w.replicated_on_most_loaded = rep_block / pp + rep_mtp;
  w.expert_sharded_on_most_loaded = (exp_block / pp + exp_mtp) / (etp * ep);
  w.parameters_on_most_loaded_shard =
      w.tp_sharded_on_most_loaded + w.replicated_on_most_loaded + w.expert_sharded_on_most_loaded;
  if (a.untie_embeddings_and_output_weights && a.pipeline_model_parallel_size == 1) {
    w.tp_sharded_on_most_loaded += embedding / tp;
    w.parameters_on_most_loaded_shard += embedding / tp;
  }
  if (a.pipeline_model_parallel_size > 1) {
    w.parameters_on_other_shards =
        tp_block / (pp * tp) + rep_block / pp + exp_block / (pp * etp * ep);
  }

  const std::int64_t expert_data_parallel =
      a.world_size / (a.expert_tensor_parallel_size * a.expert_model_parallel_size *
                      a.pipeline_model_parallel_size);
  if (a.use_distributed_optimizer && (a.data_parallel_size <= 0 || expert_data_parallel <= 0)) {
    return InvalidConfig("memtune.world_size",
                         "world_size " + std::to_string(a.world_size) +
                             " gives a data-parallel size of 0, which Megatron-LM's estimator "
                             "divides by; it must be at least TP*PP*CP and ETP*EP*PP");
  }
  w.dense_bytes_per_parameter = BytesPerParameter(a, a.data_parallel_size);
  w.expert_bytes_per_parameter = BytesPerParameter(a, expert_data_parallel);
  w.dense_bytes =
      (w.tp_sharded_on_most_loaded + w.replicated_on_most_loaded) * w.dense_bytes_per_parameter;
  w.expert_bytes = w.expert_sharded_on_most_loaded * w.expert_bytes_per_parameter;
  w.weight_and_optimizer_bytes = w.dense_bytes + w.expert_bytes;
  return w;
}

double ComputeActivationMemory(const Args& a, std::optional<std::int64_t> num_microbatches) {
  const auto s = static_cast<double>(a.seq_length);
  const auto b = static_cast<double>(a.micro_batch_size);
  const auto h = static_cast<double>(a.hidden_size);
  const auto pp = static_cast<double>(a.pipeline_model_parallel_size);
  double act = (s * b * h) * (18.0 + 4.0 * (static_cast<double>(a.ffn_hidden_size) / h));
  act *= static_cast<double>(a.num_layers);
  act += 8.0 * s * b * pp;  // input to embedding, PP micro-batches in flight
  act += s * b * h * pp;    // embedding dropout mask
  act =
      compat::ApplyPipelineScheduleFactor(act, a.pipeline_model_parallel_size,
                                          a.virtual_pipeline_model_parallel_size, num_microbatches);
  if (a.pipeline_model_parallel_size == 1) {
    act += s * b * h * 4.0 * (1.0 + static_cast<double>(a.padded_vocab_size) / h);
  }
  return act / static_cast<double>(a.tensor_model_parallel_size);
}

double ComputeActivationMemoryWithoutSp(const Args& a,
                                        std::optional<std::int64_t> num_microbatches) {
  const auto s = static_cast<double>(a.seq_length);
  const auto b = static_cast<double>(a.micro_batch_size);
  const auto h = static_cast<double>(a.hidden_size);
  const auto tp = static_cast<double>(a.tensor_model_parallel_size);
  const auto pp = static_cast<double>(a.pipeline_model_parallel_size);
  const double per_layer = s * b * h * (10.0 + 24.0 / tp);
  double total = per_layer * static_cast<double>(a.num_layers);
  total += 8.0 * s * b * pp;
  total += s * b * h * pp;
  total =
      compat::ApplyPipelineScheduleFactor(total, a.pipeline_model_parallel_size,
                                          a.virtual_pipeline_model_parallel_size, num_microbatches);
  if (a.pipeline_model_parallel_size == 1) {
    double logits = s * b * static_cast<double>(a.padded_vocab_size);
    logits /= tp;
    const double final_norm_output = s * b * h;
    total += (logits + final_norm_output) * 2.0;
  }
  constexpr double kOverheadFactor = 1.05;  // upstream: "optimizer and misc temporaries"
  return total * kOverheadFactor;
}

Result<Report> ReportTheoreticalMemory(const Args& a,
                                       std::optional<std::int64_t> num_microbatches) {
  Report r;
  MEMTUNE_TRY(r.weights, ComputeWeightAndOptimizerMemory(a));
  r.with_sp = a.sequence_parallel && a.recompute_selective;
  r.activation_bytes = r.with_sp ? ComputeActivationMemory(a, num_microbatches)
                                 : ComputeActivationMemoryWithoutSp(a, num_microbatches);
  const double weight_mb = r.weights.weight_and_optimizer_bytes / kBytesPerUpstreamMb;
  const double activation_mb = r.activation_bytes / kBytesPerUpstreamMb;
  const double total_mb = weight_mb + activation_mb;
  // Scaling by 2^-20 is exact, so this is upstream's total in bytes.
  r.total_bytes = total_mb * kBytesPerUpstreamMb;
  r.lines.push_back(r.with_sp ? "compute_activation_memory with SP"
                              : "compute_activation_memory_without_sp");
  r.lines.push_back(
      "Theoretical memory footprints: weight and optimizer=" + compat::FormatFixed2(weight_mb) +
      " MB, activation=" + compat::FormatFixed2(activation_mb) +
      " MB, total=" + compat::FormatFixed2(total_mb) + " MB");
  return r;
}

}  // namespace memtune::estimate::mlm
