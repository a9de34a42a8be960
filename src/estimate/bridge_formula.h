// Megatron-Bridge's theoretical memory estimator, step by step (private; tests check each
// quantity). Source: NVIDIA-NeMo/Megatron-Bridge @ 067f987d
// src/megatron/bridge/training/utils/theoretical_memory_utils.py.
//
// Every function computes in doubles, in upstream's operation order (Python 3.12 sum()
// included, see compat_common.h PythonSum), so each value is the Python float upstream
// computes. Conversion to int64 bytes happens only in EstimateBridge.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/core/result.h"
#include "memtune/model/job.h"

namespace memtune::estimate::bridge {

// The ConfigContainer fields the estimator reads. std::nullopt stands for Python None /
// an absent attribute; each comment gives upstream's fallback.
struct Config {
  // config.model
  std::int64_t num_layers = 1;
  std::int64_t hidden_size = 0;
  std::int64_t ffn_hidden_size = 0;
  std::int64_t num_attention_heads = 0;
  std::optional<std::int64_t> num_query_groups;  // falsy -> num_attention_heads
  std::int64_t kv_channels = 0;
  std::int64_t vocab_size = 0;
  std::int64_t make_vocab_size_divisible_by = 128;
  bool should_pad_vocab = true;  // the estimator's getattr default when absent
  bool share_embeddings_and_output_weights = true;
  std::int64_t tensor_model_parallel_size = 1;
  std::int64_t pipeline_model_parallel_size = 1;
  std::optional<std::int64_t> virtual_pipeline_model_parallel_size;
  std::optional<std::int64_t> num_layers_in_first_pipeline_stage;
  std::optional<std::int64_t> num_layers_in_last_pipeline_stage;
  std::int64_t context_parallel_size = 1;
  std::int64_t expert_model_parallel_size = 1;
  std::int64_t expert_tensor_parallel_size = 1;
  std::optional<std::int64_t> num_moe_experts;
  std::vector<int> moe_layer_freq = {1};  // one int, or one truthy flag per layer
  bool moe_layer_freq_is_list = false;
  std::optional<std::int64_t> moe_router_topk;                      // -> 1
  std::optional<std::int64_t> moe_ffn_hidden_size;                  // -> ffn_hidden_size
  std::optional<std::int64_t> moe_shared_expert_intermediate_size;  // -> 0
  std::optional<std::int64_t> moe_latent_size;
  std::optional<std::int64_t> mtp_num_layers;  // -> 0
  bool gated_linear_unit = false;
  bool activation_is_silu = false;  // activation_func is torch.nn.functional.silu
  std::int64_t seq_length = 0;
  bool sequence_parallel = false;    // read only by report_theoretical_memory
  bool recompute_selective = false;  // recompute_granularity == "selective"
  // config.train, config.optimizer, config
  std::int64_t micro_batch_size = 1;
  bool use_distributed_optimizer = false;
  std::int64_t data_parallel_size = 1;  // world / (TP * PP * CP): excludes CP
};

// Maps a job (effective values) onto the Bridge config: should_pad_vocab is the job's
// effective value (GPTModelProvider default False), ETP the effective one (MCore: TP when
// unset), data_parallel_size = world / (TP*PP*CP) with world 0 meaning TP*PP*CP,
// activation_is_silu = (activation_func == "silu").
Config ConfigFromJob(const model::Job& job);

// _count_parameters(): global counts, with the per-layer lists (MTP layers appended).
struct ParameterCounts {
  double dense_transformer = 0;  // sum of dense per layer + final norm (2h)
  double routed_experts = 0;
  double embeddings = 0;  // h*V, twice when untied
  std::vector<double> dense_transformer_by_layer;
  std::vector<double> routed_experts_by_layer;
  double final_layernorm = 0;
  double Total() const { return dense_transformer + routed_experts + embeddings; }
};

// _get_moe_layer_pattern(): per layer (MTP layers appended, copying the last layer).
// Errors (kInvalidConfig, upstream texts): "num_layers must be positive",
// "moe_layer_freq must be positive", "Invalid moe_layer_freq length: expected L, got n",
// "Unsupported moe_layer_freq value: []".
Result<std::vector<bool>> MoeLayerPattern(const Config& config);

// Errors: those of MoeLayerPattern, "<name> must be non-negative" for a negative optional
// size, vocabulary padding errors, and "hidden_size must be positive" /
// "num_attention_heads must be positive" where upstream would divide by zero.
Result<ParameterCounts> CountParameters(const Config& config);

// _dense_parameters_on_most_loaded_shard() and _routed_expert_parameters_on_most_loaded_shard().
// Errors (upstream texts): "Uneven pipeline stages require pipeline_model_parallel_size
// greater than 1", "Uneven pipeline stage layer counts do not cover all model layers",
// "Model layers must divide evenly over the remaining pipeline stages", "Each uneven
// pipeline stage layer count must divide over virtual pipeline stages", "<name> must be
// positive".
Result<double> DenseParametersOnMostLoadedShard(const Config& config,
                                                const ParameterCounts& counts);
Result<double> RoutedExpertParametersOnMostLoadedShard(const Config& config,
                                                       const ParameterCounts& counts);

// Uneven stage layer counts (_uneven_pipeline_stage_layer_counts); nullopt when even.
Result<std::optional<std::vector<std::int64_t>>> UnevenStageLayerCounts(const Config& config);

// _bytes_per_parameter(): 18, or 6 + 12 / max(1, shard) with the distributed optimizer.
double BytesPerParameter(const Config& config, std::int64_t optimizer_shard_size);
// _expert_optimizer_shard_size(): max(1, DP*TP*CP // (EP*ETP)).
std::int64_t ExpertOptimizerShardSize(const Config& config);

// _compute_activation_memory_bytes(): first-stage activation bytes.
Result<double> ActivationMemoryBytes(const Config& config,
                                     std::optional<std::int64_t> num_microbatches);

// MemoryComponentEstimate.
struct Component {
  std::string_view name;  // a literal (estimate::Component::name views it)
  double parameter_count = 0;
  double parameter_count_per_gpu = 0;
  double bytes_per_parameter = 0;
  double memory_bytes = 0;
};

// TrainingMemoryEstimate.
struct TrainingMemoryEstimate {
  std::vector<Component> model_state_components;  // dense, then routed when > 0
  std::optional<Component> activation;
  double total_parameters = 0;
  std::vector<std::string> assumptions;
  double WeightAndOptimizerBytes() const;  // Python sum() of the component bytes
  double TotalMemoryBytes() const;
};

// estimate_training_memory(config, num_microbatches, include_activation=...).
Result<TrainingMemoryEstimate> EstimateTrainingMemory(const Config& config,
                                                      std::optional<std::int64_t> num_microbatches,
                                                      bool include_activation);

// format_training_memory_estimate(estimate, unit): "Theoretical memory footprints:
// <name>=<x.xx> <unit>, ..., total=<x.xx> <unit>"; unit "MB" (MiB) or "GB" (GiB),
// case-insensitive. Error: kInvalidInput "Unsupported memory unit: <UNIT>".
Result<std::string> FormatTrainingMemoryEstimate(const TrainingMemoryEstimate& estimate,
                                                 std::string_view unit);

// report_theoretical_memory(config, num_microbatches): the line it prints (without the
// trailing blank line): the weight line alone unless SP and selective recompute are on.
Result<std::string> ReportTheoreticalMemoryLine(const Config& config,
                                                std::optional<std::int64_t> num_microbatches);

}  // namespace memtune::estimate::bridge
