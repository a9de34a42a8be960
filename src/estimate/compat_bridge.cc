// --mode bridge: Megatron-Bridge estimate_training_memory as an Estimate (one rank class:
// the most-loaded shard, first-stage activation view), with the report line training prints.
#include <string>

#include "estimate/bridge_formula.h"
#include "estimate/compat_common.h"
#include "memtune/core/units.h"
#include "memtune/estimate/compat.h"

namespace memtune::estimate {
namespace {

Component ModelStateComponent(const bridge::Component& c, bool expert) {
  Component out;
  out.name = c.name;
  out.bytes = compat::RoundToBytes(c.memory_bytes);
  out.kind = ComponentKind::kParameters;
  out.expert = expert;
  out.explanation = FormatWithCommas(compat::RoundToBytes(c.parameter_count_per_gpu)) + " of " +
                    FormatWithCommas(compat::RoundToBytes(c.parameter_count)) +
                    " params on the most-loaded shard x " +
                    compat::FormatBytesPerParameter(c.bytes_per_parameter) +
                    " B/param (weights, grads and Adam state)";
  return out;
}

// Layers on pipeline stage 0: the first uneven stage count, else L / PP.
Result<int> FirstStageLayers(const bridge::Config& config) {
  MEMTUNE_TRY(const auto uneven, bridge::UnevenStageLayerCounts(config));
  if (uneven.has_value()) return static_cast<int>(uneven->front());
  return static_cast<int>(config.num_layers / config.pipeline_model_parallel_size);
}

Result<RankEstimate> BridgeRank(const bridge::Config& config,
                                const bridge::TrainingMemoryEstimate& e,
                                std::optional<std::int64_t> num_microbatches) {
  RankEstimate rank;
  rank.pp_rank = 0;
  for (std::size_t i = 0; i < e.model_state_components.size(); ++i) {
    rank.components.push_back(ModelStateComponent(e.model_state_components[i], i > 0));
    (i > 0 ? rank.expert_bytes : rank.dense_bytes) = rank.components.back().bytes;
  }
  const double activation_bytes = e.activation.has_value() ? e.activation->memory_bytes : 0.0;
  Component activation;
  activation.name = "activation";
  activation.bytes = compat::RoundToBytes(activation_bytes);
  activation.kind = ComponentKind::kActivations;
  activation.explanation =
      "Korthikanti et al. Table 2 with SP and selective recompute, first pipeline stage, "
      "divided by TP*CP";
  rank.components.push_back(activation);
  rank.model_state_bytes = compat::RoundToBytes(e.WeightAndOptimizerBytes());
  rank.activation_bytes = activation.bytes;
  rank.allocated_bytes = compat::RoundToBytes(e.TotalMemoryBytes());
  MEMTUNE_TRY(rank.layers, FirstStageLayers(config));
  rank.in_flight_microbatches =
      compat::InFlightMicrobatches(config.pipeline_model_parallel_size,
                                   config.virtual_pipeline_model_parallel_size, num_microbatches);
  return rank;
}

}  // namespace

Result<Estimate> EstimateBridge(const model::Job& job, const EstimateOptions& options) {
  const bridge::Config config = bridge::ConfigFromJob(job);
  const std::optional<std::int64_t> num_microbatches =
      options.num_microbatches.has_value() ? options.num_microbatches
                                           : std::optional(model::NumMicrobatches(job));
  // The Estimate is estimate_training_memory(include_activation=True); the printed line
  // is report_theoretical_memory's, which drops the activation unless SP + selective.
  MEMTUNE_TRY(const bridge::TrainingMemoryEstimate e,
              bridge::EstimateTrainingMemory(config, num_microbatches, true));
  MEMTUNE_TRY(std::string line, bridge::ReportTheoreticalMemoryLine(config, num_microbatches));
  Estimate estimate;
  estimate.mode = Mode::kBridge;
  MEMTUNE_TRY(RankEstimate rank, BridgeRank(config, e, num_microbatches));
  estimate.ranks.push_back(std::move(rank));
  estimate.peak_pp_rank = 0;
  estimate.peak_allocated_bytes = estimate.ranks.front().allocated_bytes;
  estimate.gpu_capacity_bytes = job.memtune.gpu_memory_bytes.value_or(0);
  estimate.assumptions = e.assumptions;
  estimate.assumptions.insert(estimate.assumptions.begin(),
                              "memtune: reproduces NVIDIA-NeMo/Megatron-Bridge @ 067f987d "
                              "(estimate_training_memory) to the byte; other releases' formula "
                              "can differ slightly (docs/estimator-compat.md).");
  estimate.upstream_lines.push_back(std::move(line));
  return estimate;
}

}  // namespace memtune::estimate
