// --mode megatron-lm: maps a job onto Megatron-LM's arguments and reports
// report_theoretical_memory's numbers as an Estimate (one rank class: pipeline stage 0).
#include <string>

#include "estimate/compat_common.h"
#include "estimate/megatron_lm_formula.h"
#include "memtune/core/units.h"
#include "memtune/estimate/compat.h"
#include "memtune/model/versions.h"

namespace memtune::estimate {
namespace mlm {

Result<Args> ArgsFromJob(const model::Job& job) {
  const model::ModelConfig& m = job.model;
  using compat::RequirePositive;
  MEMTUNE_RETURN_IF_ERROR(RequirePositive(m.num_layers, "model.num_layers", "num_layers"));
  MEMTUNE_RETURN_IF_ERROR(RequirePositive(m.hidden_size, "model.hidden_size", "hidden_size"));
  MEMTUNE_RETURN_IF_ERROR(
      RequirePositive(m.num_attention_heads, "model.num_attention_heads", "num_attention_heads"));
  MEMTUNE_RETURN_IF_ERROR(RequirePositive(m.pipeline_model_parallel_size,
                                          "model.pipeline_model_parallel_size",
                                          "pipeline_model_parallel_size"));
  MEMTUNE_RETURN_IF_ERROR(RequirePositive(m.context_parallel_size, "model.context_parallel_size",
                                          "context_parallel_size"));
  MEMTUNE_RETURN_IF_ERROR(RequirePositive(m.expert_model_parallel_size,
                                          "model.expert_model_parallel_size",
                                          "expert_model_parallel_size"));
  MEMTUNE_RETURN_IF_ERROR(RequirePositive(model::ExpertTensorParallelSize(job),
                                          "model.expert_tensor_parallel_size",
                                          "expert_tensor_parallel_size"));
  if (m.virtual_pipeline_model_parallel_size.has_value()) {
    MEMTUNE_RETURN_IF_ERROR(RequirePositive(*m.virtual_pipeline_model_parallel_size,
                                            "model.virtual_pipeline_model_parallel_size",
                                            "virtual_pipeline_model_parallel_size"));
  }
  Args a;
  // Megatron-LM always pads (training/tokenizer setup); this also rejects TP <= 0.
  MEMTUNE_TRY(a.padded_vocab_size,
              compat::CalculatePaddedVocabSize(m.vocab_size, m.make_vocab_size_divisible_by,
                                               m.tensor_model_parallel_size));
  a.num_layers = m.num_layers;
  a.hidden_size = m.hidden_size;
  a.ffn_hidden_size = m.ffn_hidden_size;
  a.num_attention_heads = m.num_attention_heads;
  a.num_query_groups = m.num_query_groups > 0 ? m.num_query_groups : m.num_attention_heads;
  a.kv_channels = m.kv_channels > 0 ? m.kv_channels : m.hidden_size / m.num_attention_heads;
  a.group_query_attention = a.num_query_groups != a.num_attention_heads;
  // arguments.py: "if args.num_experts == 0: args.num_experts = None".
  if (m.num_moe_experts.value_or(0) > 0) a.num_experts = m.num_moe_experts;
  a.swiglu = m.gated_linear_unit;
  a.moe_shared_expert_intermediate_size = m.moe_shared_expert_intermediate_size;
  a.moe_layer_freq = m.moe_layer_freq;
  a.moe_layer_freq_is_list = m.moe_layer_freq_is_list;
  a.moe_ffn_hidden_size = m.moe_ffn_hidden_size.value_or(m.ffn_hidden_size);
  a.moe_latent_size = m.moe_latent_size;
  a.moe_router_topk = m.moe_router_topk;
  a.moe_shared_expert_gate = m.moe_shared_expert_gate;
  a.mtp_num_layers = m.mtp_num_layers;
  a.rms_norm = m.normalization == model::Normalization::kRMSNorm;
  a.legacy_norm_count = model::VersionBefore(job.memtune.versions.megatron_core, 0, 16);
  a.multi_latent_attention = m.multi_latent_attention;
  a.q_lora_rank = m.q_lora_rank;
  a.kv_lora_rank = m.kv_lora_rank;
  a.qk_head_dim = m.qk_head_dim;
  a.qk_pos_emb_head_dim = m.qk_pos_emb_head_dim;
  a.v_head_dim = m.v_head_dim;
  a.untie_embeddings_and_output_weights = !m.share_embeddings_and_output_weights;
  a.add_bias_linear = m.add_bias_linear;
  a.tensor_model_parallel_size = m.tensor_model_parallel_size;
  a.pipeline_model_parallel_size = m.pipeline_model_parallel_size;
  a.virtual_pipeline_model_parallel_size = m.virtual_pipeline_model_parallel_size;
  a.expert_model_parallel_size = m.expert_model_parallel_size;
  a.expert_tensor_parallel_size = model::ExpertTensorParallelSize(job);
  const std::int64_t model_parallel = static_cast<std::int64_t>(m.tensor_model_parallel_size) *
                                      m.pipeline_model_parallel_size * m.context_parallel_size;
  a.world_size = job.memtune.world_size > 0 ? job.memtune.world_size : model_parallel;
  a.data_parallel_size = a.world_size / model_parallel;
  a.use_distributed_optimizer = job.optimizer.use_distributed_optimizer;
  a.seq_length = m.seq_length;
  a.micro_batch_size = job.train.micro_batch_size;
  // arguments.py disables sequence parallelism when TP == 1.
  a.sequence_parallel = m.sequence_parallel && m.tensor_model_parallel_size > 1;
  a.recompute_selective = m.recompute_granularity == model::RecomputeGranularity::kSelective;
  return a;
}

}  // namespace mlm

namespace {

// Which upstream formula the figures reproduce (docs/estimator-compat.md "Versions").
std::string VersionAssumption(const std::string& megatron_core) {
  if (!model::VersionBefore(megatron_core, 0, 16)) {
    return "Reproduces NVIDIA/Megatron-LM @ d98e8a64 to the byte; other releases' formula can "
           "differ slightly (docs/estimator-compat.md).";
  }
  return "Reproduces Megatron-Core " + megatron_core +
         " (memtune.versions.megatron_core): NVIDIA/Megatron-LM @ d98e8a64 with the norms "
         "counted as before 9ad59065 (core 0.16), weight + bias each whatever the "
         "normalization (docs/estimator-compat.md).";
}

std::vector<std::string> MegatronLmAssumptions(const model::Job& job, const mlm::Report& report) {
  std::vector<std::string> out = {
      VersionAssumption(job.memtune.versions.megatron_core),
      "Megatron-LM report_theoretical_memory (megatron/training/theoretical_memory_usage.py): "
      "the most-loaded shard is pipeline stage 0, holding 1/PP of the transformer block, the "
      "whole MTP block and one embedding table (both tables when untied and PP = 1).",
      "Weight and optimizer: bf16 params, fp32 main grads, fp32 main params and fp32 Adam "
      "states, 18 B/param; with the distributed optimizer 6 B + 12 B sharded over the "
      "data-parallel size (CP excluded) for dense params and over the expert data-parallel "
      "size for routed experts.",
  };
  if (report.with_sp) {
    out.push_back(
        "Activation: compute_activation_memory (Table 2 of arXiv 2205.05198, sequence "
        "parallelism and selective recompute) for the first pipeline stage, divided by TP; "
        "MoE layers use ffn_hidden_size; MTP layers and CP are not counted.");
  } else {
    out.push_back(
        "Activation: compute_activation_memory_without_sp (sequence parallelism off or "
        "recompute granularity not selective): TP splits only inside each layer, attention "
        "scores assumed fused, recompute ignored, plus 5% for optimizer and misc temporaries.");
  }
  if (job.model.sequence_parallel && job.model.tensor_model_parallel_size == 1) {
    out.push_back("Sequence parallelism is off because TP = 1 (Megatron-LM arguments.py).");
  }
  out.push_back(
      "Not modelled: FP8/FP4 storage, LoRA, CPU offload, CUDA graphs, allocator "
      "fragmentation and memory outside PyTorch's allocator.");
  return out;
}

RankEstimate MegatronLmRank(const mlm::Args& args, const mlm::Report& report,
                            std::optional<std::int64_t> num_microbatches) {
  const mlm::WeightAndOptimizer& w = report.weights;
  RankEstimate rank;
  rank.pp_rank = 0;
  rank.model_state_bytes = compat::RoundToBytes(w.weight_and_optimizer_bytes);
  rank.activation_bytes = compat::RoundToBytes(report.activation_bytes);
  rank.allocated_bytes = compat::RoundToBytes(report.total_bytes);
  rank.dense_bytes = compat::RoundToBytes(w.dense_bytes);
  rank.expert_bytes = compat::RoundToBytes(w.expert_bytes);
  rank.layers = static_cast<int>(args.num_layers / args.pipeline_model_parallel_size);
  rank.in_flight_microbatches =
      compat::InFlightMicrobatches(args.pipeline_model_parallel_size,
                                   args.virtual_pipeline_model_parallel_size, num_microbatches);
  std::string explanation =
      FormatWithCommas(compat::RoundToBytes(w.parameters_on_most_loaded_shard)) +
      " params on the most-loaded shard; bf16 param + fp32 grad + fp32 main param + Adam m, v "
      "at " +
      compat::FormatBytesPerParameter(w.dense_bytes_per_parameter) + " B/param";
  if (w.expert_sharded_on_most_loaded > 0) {
    explanation += " (routed experts " +
                   compat::FormatBytesPerParameter(w.expert_bytes_per_parameter) + " B/param)";
  }
  rank.components.push_back(Component{"weight and optimizer", rank.model_state_bytes,
                                      ComponentKind::kParameters, false, explanation});
  rank.components.push_back(
      Component{"activation", rank.activation_bytes, ComponentKind::kActivations, false,
                report.with_sp ? "compute_activation_memory (SP + selective recompute), first stage"
                               : "compute_activation_memory_without_sp x 1.05, first stage"});
  return rank;
}

}  // namespace

Result<Estimate> EstimateMegatronLm(const model::Job& job, const EstimateOptions& options) {
  MEMTUNE_TRY(const mlm::Args args, mlm::ArgsFromJob(job));
  const std::optional<std::int64_t> num_microbatches =
      options.num_microbatches.has_value() ? options.num_microbatches
                                           : std::optional(model::NumMicrobatches(job));
  MEMTUNE_TRY(const mlm::Report report, mlm::ReportTheoreticalMemory(args, num_microbatches));
  Estimate estimate;
  estimate.mode = Mode::kMegatronLm;
  estimate.ranks.push_back(MegatronLmRank(args, report, num_microbatches));
  estimate.peak_pp_rank = 0;
  estimate.peak_allocated_bytes = estimate.ranks.front().allocated_bytes;
  estimate.gpu_capacity_bytes = job.memtune.gpu_memory_bytes.value_or(0);
  estimate.assumptions = MegatronLmAssumptions(job, report);
  estimate.upstream_lines = report.lines;
  return estimate;
}

}  // namespace memtune::estimate
