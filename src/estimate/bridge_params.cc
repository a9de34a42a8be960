// Megatron-Bridge parameter counting and most-loaded-shard placement, in upstream order.
// Source: Megatron-Bridge @ 067f987d theoretical_memory_utils.py (_count_parameters,
// _get_moe_layer_pattern, _dense/_routed_expert_parameters_on_most_loaded_shard,
// _uneven_pipeline_stage_layer_counts/_indices); restated in megatron.md §1.4-§1.5.
#include <algorithm>
#include <string>

#include "estimate/bridge_formula.h"
#include "estimate/compat_common.h"

namespace memtune::estimate::bridge {
namespace {

using compat::PythonSum;
using compat::RequirePositive;

// _optional_positive_int_attr(): None -> fallback; negative -> error.
Result<std::int64_t> OptionalNonNegative(std::optional<std::int64_t> value, const std::string& name,
                                         std::int64_t fallback) {
  if (!value.has_value()) return fallback;
  if (*value < 0) return InvalidConfig("model." + name, name + " must be non-negative");
  return *value;
}

bool HasMoe(const Config& c) { return c.num_moe_experts.value_or(0) > 0; }

// _get_vocab_size(): padded unless should_pad_vocab is false.
Result<std::int64_t> VocabSize(const Config& c) {
  if (!c.should_pad_vocab) return c.vocab_size;
  return compat::CalculatePaddedVocabSize(c.vocab_size, c.make_vocab_size_divisible_by,
                                          c.tensor_model_parallel_size);
}

// Layer indices per stage (_uneven_pipeline_stage_layer_indices).
Result<std::vector<std::vector<std::int64_t>>> StageLayerIndices(
    const Config& c, const std::vector<std::int64_t>& counts) {
  std::vector<std::vector<std::int64_t>> stages(counts.size());
  std::int64_t offset = 0;
  if (!c.virtual_pipeline_model_parallel_size.has_value()) {
    for (std::size_t r = 0; r < counts.size(); ++r) {
      for (std::int64_t i = 0; i < counts[r]; ++i) stages[r].push_back(offset++);
    }
    return stages;
  }
  const std::int64_t vpp = *c.virtual_pipeline_model_parallel_size;
  MEMTUNE_RETURN_IF_ERROR(RequirePositive(vpp, "model.virtual_pipeline_model_parallel_size",
                                          "virtual_pipeline_model_parallel_size"));
  for (std::int64_t count : counts) {
    if (count % vpp != 0) {
      return InvalidConfig("model.virtual_pipeline_model_parallel_size",
                           "Each uneven pipeline stage layer count must divide over virtual "
                           "pipeline stages");
    }
  }
  // Megatron's interleaved assignment: each round gives every rank its next chunk.
  for (std::int64_t round = 0; round < vpp; ++round) {
    for (std::size_t r = 0; r < counts.size(); ++r) {
      for (std::int64_t i = 0; i < counts[r] / vpp; ++i) stages[r].push_back(offset++);
    }
  }
  return stages;
}

// Sums per stage of `per_layer`; the last stage also gets the MTP layers (index >= L).
std::vector<double> SumByStage(const std::vector<std::vector<std::int64_t>>& stages,
                               const std::vector<double>& per_layer, std::int64_t num_layers) {
  std::vector<double> by_stage;
  for (const auto& stage : stages) {
    std::vector<double> items;
    for (std::int64_t layer : stage) items.push_back(per_layer[static_cast<std::size_t>(layer)]);
    by_stage.push_back(PythonSum(items));
  }
  const std::vector<double> mtp(per_layer.begin() + num_layers, per_layer.end());
  by_stage.back() += PythonSum(mtp);
  return by_stage;
}

}  // namespace

Result<std::vector<bool>> MoeLayerPattern(const Config& c) {
  MEMTUNE_RETURN_IF_ERROR(RequirePositive(c.num_layers, "model.num_layers", "num_layers"));
  const auto num_layers = static_cast<std::size_t>(c.num_layers);
  std::vector<bool> pattern(num_layers, false);
  if (HasMoe(c)) {
    if (c.moe_layer_freq_is_list) {
      if (c.moe_layer_freq.size() != num_layers) {
        return InvalidConfig("model.moe_layer_freq", "Invalid moe_layer_freq length: expected " +
                                                         std::to_string(num_layers) + ", got " +
                                                         std::to_string(c.moe_layer_freq.size()));
      }
      for (std::size_t i = 0; i < num_layers; ++i) pattern[i] = c.moe_layer_freq[i] != 0;
    } else {
      if (c.moe_layer_freq.empty()) {
        return InvalidConfig("model.moe_layer_freq", "Unsupported moe_layer_freq value: []");
      }
      const int freq = c.moe_layer_freq.front();
      if (freq <= 0)
        return InvalidConfig("model.moe_layer_freq", "moe_layer_freq must be positive");
      for (std::size_t i = 0; i < num_layers; ++i) pattern[i] = i % freq == 0;
    }
  }
  const std::int64_t mtp_layers = c.mtp_num_layers.value_or(0);
  const bool last = pattern.back();
  for (std::int64_t i = 0; i < mtp_layers; ++i) pattern.push_back(last);
  return pattern;
}

Result<ParameterCounts> CountParameters(const Config& c) {
  MEMTUNE_TRY(const std::vector<bool> pattern, MoeLayerPattern(c));
  // Upstream divides by these (ZeroDivisionError); memtune reports them instead.
  MEMTUNE_RETURN_IF_ERROR(RequirePositive(c.hidden_size, "model.hidden_size", "hidden_size"));
  MEMTUNE_RETURN_IF_ERROR(
      RequirePositive(c.num_attention_heads, "model.num_attention_heads", "num_attention_heads"));
  const double h = static_cast<double>(c.hidden_size);
  const double heads = static_cast<double>(c.num_attention_heads);
  const double factor = c.gated_linear_unit && c.activation_is_silu ? 3.0 : 2.0;
  const double ratio = static_cast<double>(c.kv_channels * c.num_attention_heads) / h;
  const std::int64_t groups =
      c.num_query_groups.value_or(0) != 0 ? *c.num_query_groups : c.num_attention_heads;
  const double attention = 2.0 * h * h * ((1.0 + static_cast<double>(groups) / heads) * ratio);
  const double layernorm = 4.0 * h;
  const double dense_mlp = factor * h * static_cast<double>(c.ffn_hidden_size);
  MEMTUNE_TRY(const std::int64_t shared_size,
              OptionalNonNegative(c.moe_shared_expert_intermediate_size,
                                  "moe_shared_expert_intermediate_size", 0));
  const double shared = factor * h * static_cast<double>(shared_size);
  double routed = 0.0;
  double latent_projection = 0.0;
  if (HasMoe(c) && std::find(pattern.begin(), pattern.end(), true) != pattern.end()) {
    MEMTUNE_TRY(
        const std::int64_t moe_ffn,
        OptionalNonNegative(c.moe_ffn_hidden_size, "moe_ffn_hidden_size", c.ffn_hidden_size));
    const double experts = static_cast<double>(*c.num_moe_experts);
    const double width =
        c.moe_latent_size.has_value() ? static_cast<double>(*c.moe_latent_size) : h;
    routed = factor * width * static_cast<double>(moe_ffn) * experts;
    if (c.moe_latent_size.has_value()) {
      latent_projection = 2.0 * h * static_cast<double>(*c.moe_latent_size);
    }
  }
  ParameterCounts counts;
  for (bool moe : pattern) {
    counts.dense_transformer_by_layer.push_back(attention + layernorm +
                                                (moe ? shared + latent_projection : dense_mlp));
    counts.routed_experts_by_layer.push_back(moe ? routed : 0.0);
  }
  counts.final_layernorm = 2.0 * h;
  counts.dense_transformer = PythonSum(counts.dense_transformer_by_layer) + counts.final_layernorm;
  counts.routed_experts = PythonSum(counts.routed_experts_by_layer);
  MEMTUNE_TRY(const std::int64_t vocab, VocabSize(c));
  const double embedding = h * static_cast<double>(vocab);
  counts.embeddings = c.share_embeddings_and_output_weights ? embedding : 2.0 * embedding;
  return counts;
}

Result<std::optional<std::vector<std::int64_t>>> UnevenStageLayerCounts(const Config& c) {
  const auto& first = c.num_layers_in_first_pipeline_stage;
  const auto& last = c.num_layers_in_last_pipeline_stage;
  if (!first.has_value() && !last.has_value()) return std::optional<std::vector<std::int64_t>>();
  const std::int64_t pp = c.pipeline_model_parallel_size;
  if (pp <= 1) {
    return InvalidConfig("model.pipeline_model_parallel_size",
                         "Uneven pipeline stages require pipeline_model_parallel_size greater "
                         "than 1");
  }
  MEMTUNE_RETURN_IF_ERROR(RequirePositive(c.num_layers, "model.num_layers", "num_layers"));
  std::int64_t layers_left = c.num_layers;
  std::int64_t stages_left = pp;
  if (first.has_value()) {
    MEMTUNE_RETURN_IF_ERROR(RequirePositive(*first, "model.num_layers_in_first_pipeline_stage",
                                            "num_layers_in_first_pipeline_stage"));
    layers_left -= *first;
    --stages_left;
  }
  if (last.has_value()) {
    MEMTUNE_RETURN_IF_ERROR(RequirePositive(*last, "model.num_layers_in_last_pipeline_stage",
                                            "num_layers_in_last_pipeline_stage"));
    layers_left -= *last;
    --stages_left;
  }
  std::int64_t middle = 0;
  if (stages_left == 0) {
    if (layers_left != 0) {
      return InvalidConfig("model.num_layers",
                           "Uneven pipeline stage layer counts do not cover all model layers");
    }
  } else {
    if (layers_left <= 0 || layers_left % stages_left != 0) {
      return InvalidConfig("model.num_layers",
                           "Model layers must divide evenly over the remaining pipeline stages");
    }
    middle = layers_left / stages_left;
  }
  std::vector<std::int64_t> counts(static_cast<std::size_t>(pp), middle);
  if (first.has_value()) counts.front() = *first;
  if (last.has_value()) counts.back() = *last;
  return std::optional(counts);
}

Result<double> DenseParametersOnMostLoadedShard(const Config& c, const ParameterCounts& counts) {
  MEMTUNE_TRY(const auto stage_counts, UnevenStageLayerCounts(c));
  MEMTUNE_TRY(const std::int64_t vocab, VocabSize(c));
  const double embedding = static_cast<double>(c.hidden_size) * static_cast<double>(vocab);
  const double tp = static_cast<double>(c.tensor_model_parallel_size);
  const double pp = static_cast<double>(c.pipeline_model_parallel_size);
  if (!stage_counts.has_value()) {
    // _embedding_parameters_on_most_loaded_shard(): one table, two when untied and PP == 1.
    double embedding_shard = embedding / tp;
    if (!c.share_embeddings_and_output_weights && c.pipeline_model_parallel_size == 1) {
      embedding_shard += embedding / tp;
    }
    return counts.dense_transformer / (pp * tp) + embedding_shard;
  }
  MEMTUNE_TRY(const auto stages, StageLayerIndices(c, *stage_counts));
  std::vector<double> by_stage =
      SumByStage(stages, counts.dense_transformer_by_layer, c.num_layers);
  by_stage.back() += counts.final_layernorm;
  by_stage.front() += embedding;  // both end stages get one h*V, tied or not
  by_stage.back() += embedding;
  return *std::max_element(by_stage.begin(), by_stage.end()) / tp;
}

Result<double> RoutedExpertParametersOnMostLoadedShard(const Config& c,
                                                       const ParameterCounts& counts) {
  MEMTUNE_TRY(const auto stage_counts, UnevenStageLayerCounts(c));
  const double ep = static_cast<double>(c.expert_model_parallel_size);
  const double etp = static_cast<double>(c.expert_tensor_parallel_size);
  if (!stage_counts.has_value()) {
    const double pp = static_cast<double>(c.pipeline_model_parallel_size);
    return counts.routed_experts / (pp * ep * etp);
  }
  MEMTUNE_TRY(const auto stages, StageLayerIndices(c, *stage_counts));
  const std::vector<double> by_stage =
      SumByStage(stages, counts.routed_experts_by_layer, c.num_layers);
  return *std::max_element(by_stage.begin(), by_stage.end()) / (ep * etp);
}

}  // namespace memtune::estimate::bridge
