// Megatron-LM's theoretical memory estimator, step by step (private; tests check each
// quantity). Source: NVIDIA/Megatron-LM @ d98e8a64 megatron/training/theoretical_memory_usage.py.
//
// Every function computes in doubles, in upstream's operation order, so each value is the
// Python float upstream computes (integers below 2^53 are exact in both). Conversion to
// int64 bytes happens only in EstimateMegatronLm (see compat_common.h RoundToBytes).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "memtune/core/result.h"
#include "memtune/model/job.h"

namespace memtune::estimate::mlm {

// The argparse fields the estimator reads, after Megatron-LM's argument rules
// (megatron/training/arguments.py): ETP defaults to TP, moe_ffn_hidden_size to
// ffn_hidden_size, num_experts 0 means none, SP is off when TP == 1,
// --recompute-activations means granularity 'selective'.
struct Args {
  std::int64_t num_layers = 0;
  std::int64_t hidden_size = 0;
  std::int64_t ffn_hidden_size = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t num_query_groups = 0;
  std::int64_t kv_channels = 0;
  bool group_query_attention = false;
  std::optional<std::int64_t> num_experts;
  bool swiglu = false;
  std::optional<std::int64_t> moe_shared_expert_intermediate_size;
  std::vector<int> moe_layer_freq = {1};  // one int, or a 0/1 flag per layer
  bool moe_layer_freq_is_list = false;
  std::int64_t moe_ffn_hidden_size = 0;
  std::optional<std::int64_t> moe_latent_size;
  std::int64_t moe_router_topk = 2;
  bool moe_shared_expert_gate = false;
  std::optional<std::int64_t> mtp_num_layers;
  bool rms_norm = false;  // normalization == "RMSNorm"
  // Megatron-Core < 0.16 (before 9ad59065, "Fix theoretical memory calculation of
  // layernorm"): every norm counts a weight and a bias (2 per element) and the MLA q/kv
  // norms 1, whatever the normalization (memtune.versions.megatron_core).
  bool legacy_norm_count = false;
  bool multi_latent_attention = false;
  std::optional<std::int64_t> q_lora_rank;
  std::int64_t kv_lora_rank = 512;
  std::int64_t qk_head_dim = 128;
  std::int64_t qk_pos_emb_head_dim = 64;
  std::int64_t v_head_dim = 128;
  std::int64_t padded_vocab_size = 0;
  bool untie_embeddings_and_output_weights = false;
  bool add_bias_linear = false;
  std::int64_t tensor_model_parallel_size = 1;
  std::int64_t pipeline_model_parallel_size = 1;
  std::optional<std::int64_t> virtual_pipeline_model_parallel_size;
  std::int64_t expert_model_parallel_size = 1;
  std::int64_t expert_tensor_parallel_size = 1;
  std::int64_t world_size = 1;
  std::int64_t data_parallel_size = 1;  // world / (TP * PP * CP): excludes CP
  bool use_distributed_optimizer = false;
  std::int64_t seq_length = 0;
  std::int64_t micro_batch_size = 1;
  bool sequence_parallel = false;
  bool recompute_selective = false;  // recompute_granularity == 'selective'
};

// Maps a job (effective values) onto Megatron-LM's arguments: swiglu = gated_linear_unit,
// group_query_attention = (num_query_groups != num_attention_heads), untie = !tied,
// padded_vocab_size = calculate_padded_vocab_size (MLM always pads), world = world_size
// (0: TP*PP*CP). Errors: kInvalidConfig for a non-positive size upstream would divide by,
// or vocabulary padding errors (compat_common.h).
Result<Args> ArgsFromJob(const model::Job& job);

// compute_weight_and_optimizer_memory(), with its intermediate counts.
struct WeightAndOptimizer {
  double transformer_block_parameters = 0;  // incl. the final norm
  double mtp_block_parameters = 0;
  double embedding_parameters = 0;  // h*V, twice when untied
  double total_parameters = 0;
  double tp_sharded_on_most_loaded = 0;      // TP-sharded params on stage 0 (after /TP)
  double replicated_on_most_loaded = 0;      // norms, router, latent projections, gate
  double expert_sharded_on_most_loaded = 0;  // routed experts (after /(ETP*EP))
  double parameters_on_most_loaded_shard = 0;
  std::optional<double> parameters_on_other_shards;  // PP > 1 only
  double dense_bytes_per_parameter = 0;              // 18, or 6 + 12/DP
  double expert_bytes_per_parameter = 0;             // 18, or 6 + 12/EDP
  double dense_bytes = 0;                            // (tp + replicated) * dense bpp
  double expert_bytes = 0;                           // expert * expert bpp
  double weight_and_optimizer_bytes = 0;             // dense + expert
};

// Errors (kInvalidConfig): the moe_layer_freq list length does not equal num_layers
// (upstream's assert text), an int moe_layer_freq <= 0, MLA with GQA on, a zero divisor.
Result<WeightAndOptimizer> ComputeWeightAndOptimizerMemory(const Args& args);

// compute_activation_memory(): the SP + selective formula, bytes.
double ComputeActivationMemory(const Args& args, std::optional<std::int64_t> num_microbatches);

// compute_activation_memory_without_sp(): bytes, including the 1.05 overhead factor.
double ComputeActivationMemoryWithoutSp(const Args& args,
                                        std::optional<std::int64_t> num_microbatches);

// report_theoretical_memory(): what it computes and prints.
struct Report {
  WeightAndOptimizer weights;
  bool with_sp = false;         // the SP + selective branch was taken
  double activation_bytes = 0;  // upstream's activation, bytes
  double total_bytes = 0;       // weights + activation, bytes
  // The printed lines, without the trailing blank line upstream's "\n" adds:
  // "compute_activation_memory with SP" (or "..._without_sp"), then
  // "Theoretical memory footprints: weight and optimizer=W MB, activation=A MB, total=T MB".
  std::vector<std::string> lines;
};

Result<Report> ReportTheoreticalMemory(const Args& args,
                                       std::optional<std::int64_t> num_microbatches);

}  // namespace memtune::estimate::mlm
