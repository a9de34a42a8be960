// Megatron-Bridge estimate_training_memory: bytes per parameter, activation, assembly,
// formatting and the training-time report line, in upstream order.
// Source: Megatron-Bridge @ 067f987d theoretical_memory_utils.py; megatron.md §1.6-§1.8.
#include "estimate/bridge_formula.h"

#include <cctype>
#include <string>

#include "estimate/compat_common.h"

namespace memtune::estimate::bridge {
namespace {

using compat::FormatFixed2;
using compat::kBytesPerUpstreamMb;
using compat::PythonSum;
using compat::RequirePositive;

// The _positive_int_attr checks estimate_training_memory makes on the layout.
Status CheckLayout(const Config& c) {
  MEMTUNE_RETURN_IF_ERROR(RequirePositive(c.tensor_model_parallel_size,
                                          "model.tensor_model_parallel_size",
                                          "tensor_model_parallel_size"));
  MEMTUNE_RETURN_IF_ERROR(RequirePositive(c.pipeline_model_parallel_size,
                                          "model.pipeline_model_parallel_size",
                                          "pipeline_model_parallel_size"));
  MEMTUNE_RETURN_IF_ERROR(RequirePositive(c.context_parallel_size, "model.context_parallel_size",
                                          "context_parallel_size"));
  MEMTUNE_RETURN_IF_ERROR(RequirePositive(c.expert_model_parallel_size,
                                          "model.expert_model_parallel_size",
                                          "expert_model_parallel_size"));
  return RequirePositive(c.expert_tensor_parallel_size, "model.expert_tensor_parallel_size",
                         "expert_tensor_parallel_size");
}

Status CheckDataParallel(const Config& c) {
  return RequirePositive(c.data_parallel_size, "memtune.world_size", "data_parallel_size");
}

// _ffn_activation_ratio(): weighted FFN width over hidden size (MoE: topk*f_e + shared).
Result<double> FfnActivationRatio(const Config& c, const std::vector<bool>& pattern) {
  std::int64_t moe_layers = 0;
  for (bool moe : pattern) moe_layers += moe ? 1 : 0;
  const auto total_layers = static_cast<std::int64_t>(pattern.size());
  const std::int64_t dense_ffn = (total_layers - moe_layers) * c.ffn_hidden_size;
  std::int64_t moe_ffn = 0;
  if (c.num_moe_experts.value_or(0) > 0 && moe_layers > 0) {
    const auto non_negative = [](std::optional<std::int64_t> v, const char* name,
                                 std::int64_t fallback) -> Result<std::int64_t> {
      if (!v.has_value()) return fallback;
      if (*v < 0)
        return InvalidConfig(std::string("model.") + name,
                             std::string(name) + " must be non-negative");
      return *v;
    };
    MEMTUNE_TRY(const std::int64_t topk, non_negative(c.moe_router_topk, "moe_router_topk", 1));
    MEMTUNE_TRY(const std::int64_t expert_ffn,
                non_negative(c.moe_ffn_hidden_size, "moe_ffn_hidden_size", c.ffn_hidden_size));
    MEMTUNE_TRY(const std::int64_t shared, non_negative(c.moe_shared_expert_intermediate_size,
                                                        "moe_shared_expert_intermediate_size", 0));
    moe_ffn = moe_layers * (expert_ffn * topk + shared);
  }
  return static_cast<double>(dense_ffn + moe_ffn) /
         static_cast<double>(total_layers * c.hidden_size);
}

// _estimate_assumptions(): upstream's strings, verbatim (they are output, not code).
std::vector<std::string> Assumptions(const Config& c, bool include_activation, bool has_routed) {
  std::vector<std::string> out = {
      "Reports the most-loaded GPU shard; runtime allocator, kernel workspace, and CUDA graph "
      "buffers are excluded.",
      "Weight/optimizer bytes use the Megatron Bridge Adam estimate: 18 B/parameter without "
      "distributed optimizer, otherwise 6 B plus 12 B sharded over the relevant optimizer group.",
      "Embedding parameters are assigned to first/last pipeline stages; untied embeddings "
      "double-count only when PP=1.",
  };
  if (has_routed) {
    out.push_back(
        "Routed MoE expert parameters are sharded by expert_model_parallel_size and "
        "expert_tensor_parallel_size; routed expert optimizer state uses the expert "
        "data-parallel shard size.");
  }
  if (c.context_parallel_size > 1) {
    out.push_back(
        "Dense optimizer state and activations are divided across context parallel ranks.");
  }
  if (include_activation) {
    out.push_back(
        "Activation estimates assume sequence parallelism and selective activation "
        "recomputation; full recompute, CPU offload, token imbalance, and dispatcher workspace "
        "are not modeled.");
  }
  return out;
}

}  // namespace

Config ConfigFromJob(const model::Job& job) {
  const model::ModelConfig& m = job.model;
  Config c;
  c.num_layers = m.num_layers;
  c.hidden_size = m.hidden_size;
  c.ffn_hidden_size = m.ffn_hidden_size;
  c.num_attention_heads = m.num_attention_heads;
  if (m.num_query_groups > 0) c.num_query_groups = m.num_query_groups;
  // kv_channels is effective in a parsed job; hidden / heads is MCore's default.
  c.kv_channels = m.kv_channels;
  if (c.kv_channels <= 0 && m.num_attention_heads > 0) {
    c.kv_channels = m.hidden_size / m.num_attention_heads;
  }
  c.vocab_size = m.vocab_size;
  c.make_vocab_size_divisible_by = m.make_vocab_size_divisible_by;
  c.should_pad_vocab = m.should_pad_vocab;
  c.share_embeddings_and_output_weights = m.share_embeddings_and_output_weights;
  c.tensor_model_parallel_size = m.tensor_model_parallel_size;
  c.pipeline_model_parallel_size = m.pipeline_model_parallel_size;
  c.virtual_pipeline_model_parallel_size = m.virtual_pipeline_model_parallel_size;
  c.num_layers_in_first_pipeline_stage = m.num_layers_in_first_pipeline_stage;
  c.num_layers_in_last_pipeline_stage = m.num_layers_in_last_pipeline_stage;
  c.context_parallel_size = m.context_parallel_size;
  c.expert_model_parallel_size = m.expert_model_parallel_size;
  c.expert_tensor_parallel_size = model::ExpertTensorParallelSize(job);
  c.num_moe_experts = m.num_moe_experts;
  c.moe_layer_freq = m.moe_layer_freq;
  c.moe_layer_freq_is_list = m.moe_layer_freq_is_list;
  c.moe_router_topk = m.moe_router_topk;
  c.moe_ffn_hidden_size = m.moe_ffn_hidden_size;
  c.moe_shared_expert_intermediate_size = m.moe_shared_expert_intermediate_size;
  c.moe_latent_size = m.moe_latent_size;
  c.mtp_num_layers = m.mtp_num_layers;
  c.gated_linear_unit = m.gated_linear_unit;
  c.activation_is_silu = m.activation_func == "silu";
  c.seq_length = m.seq_length;
  c.sequence_parallel = m.sequence_parallel;
  c.recompute_selective = m.recompute_granularity == model::RecomputeGranularity::kSelective;
  c.micro_batch_size = job.train.micro_batch_size;
  c.use_distributed_optimizer = job.optimizer.use_distributed_optimizer;
  const std::int64_t model_parallel = static_cast<std::int64_t>(m.tensor_model_parallel_size) *
                                      m.pipeline_model_parallel_size * m.context_parallel_size;
  const std::int64_t world = job.memtune.world_size > 0 ? job.memtune.world_size : model_parallel;
  c.data_parallel_size = model_parallel > 0 ? world / model_parallel : 0;
  return c;
}

double BytesPerParameter(const Config& c, std::int64_t optimizer_shard_size) {
  if (!c.use_distributed_optimizer) return 18.0;
  return 6.0 + 12.0 / static_cast<double>(std::max<std::int64_t>(1, optimizer_shard_size));
}

std::int64_t ExpertOptimizerShardSize(const Config& c) {
  std::int64_t shard =
      c.data_parallel_size * c.tensor_model_parallel_size * c.context_parallel_size;
  shard /= std::max<std::int64_t>(1, c.expert_model_parallel_size * c.expert_tensor_parallel_size);
  return std::max<std::int64_t>(1, shard);
}

Result<double> ActivationMemoryBytes(const Config& c,
                                     std::optional<std::int64_t> num_microbatches) {
  MEMTUNE_RETURN_IF_ERROR(CheckLayout(c));
  MEMTUNE_TRY(const std::vector<bool> pattern, MoeLayerPattern(c));
  MEMTUNE_RETURN_IF_ERROR(RequirePositive(c.hidden_size, "model.hidden_size", "hidden_size"));
  if (c.virtual_pipeline_model_parallel_size.has_value()) {  // upstream divides by it
    MEMTUNE_RETURN_IF_ERROR(RequirePositive(*c.virtual_pipeline_model_parallel_size,
                                            "model.virtual_pipeline_model_parallel_size",
                                            "virtual_pipeline_model_parallel_size"));
  }
  MEMTUNE_TRY(const double ratio, FfnActivationRatio(c, pattern));
  const auto s = static_cast<double>(c.seq_length);
  const auto b = static_cast<double>(c.micro_batch_size);
  const auto h = static_cast<double>(c.hidden_size);
  const auto pp = static_cast<double>(c.pipeline_model_parallel_size);
  double act = (s * b * h) * (18.0 + 4.0 * ratio);
  act *= static_cast<double>(pattern.size());
  act += 8.0 * s * b * pp;  // input to embedding, PP micro-batches in flight
  act += s * b * h * pp;    // embedding dropout mask
  act =
      compat::ApplyPipelineScheduleFactor(act, c.pipeline_model_parallel_size,
                                          c.virtual_pipeline_model_parallel_size, num_microbatches);
  if (c.pipeline_model_parallel_size == 1) {
    std::int64_t vocab = c.vocab_size;
    if (c.should_pad_vocab) {
      MEMTUNE_TRY(vocab,
                  compat::CalculatePaddedVocabSize(c.vocab_size, c.make_vocab_size_divisible_by,
                                                   c.tensor_model_parallel_size));
    }
    act += s * b * h * 4.0 * (1.0 + static_cast<double>(vocab) / h);
  }
  return act / static_cast<double>(c.tensor_model_parallel_size * c.context_parallel_size);
}

double TrainingMemoryEstimate::WeightAndOptimizerBytes() const {
  std::vector<double> bytes;
  for (const Component& component : model_state_components) bytes.push_back(component.memory_bytes);
  return PythonSum(bytes);
}

double TrainingMemoryEstimate::TotalMemoryBytes() const {
  return WeightAndOptimizerBytes() + (activation.has_value() ? activation->memory_bytes : 0.0);
}

Result<TrainingMemoryEstimate> EstimateTrainingMemory(const Config& c,
                                                      std::optional<std::int64_t> num_microbatches,
                                                      bool include_activation) {
  MEMTUNE_TRY(const ParameterCounts counts, CountParameters(c));
  MEMTUNE_RETURN_IF_ERROR(CheckLayout(c));
  TrainingMemoryEstimate estimate;
  Component dense;
  dense.name = "dense parameters and optimizer";
  dense.parameter_count = counts.dense_transformer + counts.embeddings;
  MEMTUNE_TRY(dense.parameter_count_per_gpu, DenseParametersOnMostLoadedShard(c, counts));
  MEMTUNE_RETURN_IF_ERROR(CheckDataParallel(c));
  dense.bytes_per_parameter = BytesPerParameter(c, c.data_parallel_size * c.context_parallel_size);
  dense.memory_bytes = dense.parameter_count_per_gpu * dense.bytes_per_parameter;
  estimate.model_state_components.push_back(dense);
  const bool has_routed = counts.routed_experts > 0;
  if (has_routed) {
    Component routed;
    routed.name = "routed expert parameters and optimizer";
    routed.parameter_count = counts.routed_experts;
    MEMTUNE_TRY(routed.parameter_count_per_gpu, RoutedExpertParametersOnMostLoadedShard(c, counts));
    routed.bytes_per_parameter = BytesPerParameter(c, ExpertOptimizerShardSize(c));
    routed.memory_bytes = routed.parameter_count_per_gpu * routed.bytes_per_parameter;
    estimate.model_state_components.push_back(routed);
  }
  if (include_activation) {
    Component activation;
    activation.name = "activation";
    MEMTUNE_TRY(activation.memory_bytes, ActivationMemoryBytes(c, num_microbatches));
    estimate.activation = activation;
  }
  estimate.total_parameters = counts.Total();
  estimate.assumptions = Assumptions(c, include_activation, has_routed);
  return estimate;
}

Result<std::string> FormatTrainingMemoryEstimate(const TrainingMemoryEstimate& estimate,
                                                 std::string_view unit) {
  std::string upper(unit);
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  double scale = 0;
  if (upper == "MB") {
    scale = compat::kBytesPerUpstreamMb;
  } else if (upper == "GB") {
    scale = compat::kBytesPerUpstreamGb;
  } else {
    return InvalidInput("unit", "Unsupported memory unit: " + upper, "allowed: MB, GB");
  }
  std::string text = "Theoretical memory footprints: ";
  const auto part = [&](std::string_view name, double bytes) {
    return std::string(name) + "=" + FormatFixed2(bytes / scale) + " " + upper;
  };
  for (const Component& component : estimate.model_state_components) {
    text += part(component.name, component.memory_bytes) + ", ";
  }
  if (estimate.activation.has_value()) {
    text += part(estimate.activation->name, estimate.activation->memory_bytes) + ", ";
  }
  return text + part("total", estimate.TotalMemoryBytes());
}

Result<std::string> ReportTheoreticalMemoryLine(const Config& c,
                                                std::optional<std::int64_t> num_microbatches) {
  const bool report_activation = c.sequence_parallel && c.recompute_selective;
  MEMTUNE_TRY(const TrainingMemoryEstimate estimate,
              EstimateTrainingMemory(c, num_microbatches, report_activation));
  const double weight_mb = estimate.WeightAndOptimizerBytes() / kBytesPerUpstreamMb;
  std::string line =
      "Theoretical memory footprints: weight and optimizer=" + FormatFixed2(weight_mb) + " MB";
  if (!report_activation) return line;
  const double activation_mb = estimate.activation.has_value()
                                   ? estimate.activation->memory_bytes / kBytesPerUpstreamMb
                                   : 0.0;
  return line + ", activation=" + FormatFixed2(activation_mb) +
         " MB, total=" + FormatFixed2(weight_mb + activation_mb) + " MB";
}

}  // namespace memtune::estimate::bridge
