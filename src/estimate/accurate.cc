// The accurate estimate: every pipeline rank's model state, activations at its schedule
// peak and the transient live then; the peak is the max over ranks of the per-rank sum.
#include "accurate.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "fsdp2_estimate.h"
#include "memtune/core/units.h"
#include "memtune/estimate/schedule.h"
#include "memtune/model/gpu_catalog.h"
#include "rank_components.h"
#include "schedule_internal.h"
#include "tensors/activations.h"
#include "tensors/model_state.h"
#include "tensors/moe_load.h"
#include "tensors/workspaces.h"

namespace memtune::estimate::internal {

using namespace ::memtune::tensors;  // NOLINT(google-build-using-namespace): the tensor model

namespace {

std::string Fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

// The routing the MoE layers are sized with (tensors/moe_load.h), in words.
std::string RoutingAssumption(const model::Job& job) {
  const double spread = RoutingSpread(job);
  const MoeLoadModel load = MakeMoeLoadModel(job);
  const std::string source = job.memtune.moe_routing_spread ? "memtune.moe_routing_spread"
                             : job.model.moe_router_force_load_balancing
                                 ? "moe_router_force_load_balancing"
                                 : "default for a learned router; set memtune.moe_routing_spread";
  if (spread <= 0) return "MoE routing balanced over experts (" + source + ")";
  std::string out =
      "MoE routing imbalance: expert log-load spread " + Fixed(spread, 2) + " (" + source + ")";
  if (load.active()) {
    return out +
           "; the expert rows vary by layer and micro-batch (EP rank 0's load, log-load "
           "sigma " +
           Fixed(load.rank_sigma, 3) + "), each rank's schedule walked to its peak";
  }
  return out +
         "; not applied here (one expert-parallel rank, full recompute or offloading): "
         "balanced sizes";
}

Status CheckSupported(const model::Job& job) {
  const auto& m = job.model;
  if (m.num_layers <= 0 || m.hidden_size <= 0 || m.num_attention_heads <= 0 || m.seq_length <= 0) {
    return InvalidConfig("model",
                         "num_layers, hidden_size, num_attention_heads and seq_length "
                         "must be positive");
  }
  if (m.tensor_model_parallel_size <= 0 || m.pipeline_model_parallel_size <= 0 ||
      m.context_parallel_size <= 0 || m.expert_model_parallel_size <= 0) {
    return InvalidConfig("model", "parallel sizes must be positive");
  }
  if (m.cuda_graph_impl == model::CudaGraphImpl::kFullIteration) {
    return Unsupported("model.cuda_graph_impl",
                       "full_iteration CUDA graphs keep a private pool per graph; not modelled");
  }
  // Unfused attention's [b, heads, s, s] scores grow with s^2: past any device's memory the
  // byte counts would overflow, so such a job is refused here (in floating point).
  if (model::CoreAttentionOf(m) != model::CoreAttention::kFused) {
    const double s = static_cast<double>(m.seq_length) / std::max(1, m.context_parallel_size);
    const double scores = 8.0 * static_cast<double>(job.train.micro_batch_size) *
                          static_cast<double>(m.num_attention_heads) * s * s;
    if (scores > static_cast<double>(kMaxDeviceBytes)) {
      return InvalidConfig("model.seq_length",
                           "unfused attention at seq_length " + std::to_string(m.seq_length) +
                               " keeps a softmax of " +
                               FormatGB(static_cast<std::int64_t>(std::min(scores, 9.0e18))) +
                               " per layer, beyond any device",
                           "use attention_backend: auto (flash or fused attention)");
    }
  }
  return OkStatus();
}

struct GpuFacts {
  std::int64_t capacity_bytes = 0, context_bytes = 0;
  bool fp8_transpose = true;
};

Result<GpuFacts> LookUpGpu(const model::Job& job) {
  GpuFacts facts;
  if (!job.memtune.gpu.empty()) {
    MEMTUNE_TRY(const model::GpuSpec* found, model::FindGpuEntry(job.memtune.gpu));
    facts.capacity_bytes = found->total_memory_bytes;
    facts.context_bytes = found->cuda_context_bytes;
    facts.fp8_transpose = Fp8GemmNeedsTranspose(found->compute_capability);
  }
  if (job.memtune.gpu_memory_bytes) {
    facts.capacity_bytes = *job.memtune.gpu_memory_bytes;
    if (facts.capacity_bytes <=
        facts.context_bytes) {  // would leave no (or negative) usable memory
      return InvalidInput("memtune.gpu_memory_bytes",
                          std::to_string(facts.capacity_bytes) + " B is not above the " +
                              job.memtune.gpu + " catalog's CUDA context and library memory (" +
                              FormatGB(facts.context_bytes) + ")",
                          "give the device's total memory, e.g. 80GiB");
    }
  }
  return facts;
}

void AddAssumptions(const model::Job& job, Estimate& e) {
  const auto& m = job.model;
  const char* spec =
      "Transformer Engine layer spec (fused norm + linear, fused/flash attention, fused RoPE)";
  switch (model::CoreAttentionOf(m)) {
    case model::CoreAttention::kFused:
      break;
    case model::CoreAttention::kTeUnfused:
      spec =
          "Transformer Engine layer spec with unfused attention (attention_backend: unfused): "
          "the [b, heads, s, s] softmax is kept for backward";
      break;
    case model::CoreAttention::kLocal:
      spec = m.transformer_impl == model::TransformerImpl::kLocal
                 ? "MCore local layer spec (transformer_impl: local): unfused attention keeps the "
                   "[b, heads, s, s] softmax, plus one persistent score buffer"
                 : "MCore DotProductAttention (attention_backend: local): the [b, heads, s, s] "
                   "softmax is kept for backward, plus one persistent score buffer";
      break;
  }
  e.assumptions = {
      spec,
      "pipeline outputs deallocated after send (deallocate_pipeline_outputs, as Megatron-LM "
      "and Bridge set it)",
      m.gradient_accumulation_fusion
          ? "gradient_accumulation_fusion: weight gradients accumulate into the grad buffer; TE "
            "keeps one weight-gradient placeholder per weight shape"
          : "no gradient_accumulation_fusion: each backward returns a weight-sized gradient that "
            "the DDP hook adds to the grad buffer",
      "peak of max_allocated: allocator fragmentation and reserved memory are not included",
  };
  switch (job.memtune.optimizer_implementation) {
    case model::OptimizerImpl::kFused:
      e.assumptions.push_back(
          "optimizer step: TE's (or Apex's) FusedAdam, no temporaries "
          "(memtune.optimizer_implementation: fused)");
      break;
    case model::OptimizerImpl::kForeach:
      e.assumptions.push_back(
          "optimizer step: PyTorch's AdamW, foreach (neither TE's nor Apex's FusedAdam "
          "imports): the sqrt of every exp_avg_sq is alive at once (tmp.adam)");
      break;
    case model::OptimizerImpl::kForLoop:
      e.assumptions.push_back(
          "optimizer step: PyTorch's AdamW, for-loop: three of the largest parameter shard's "
          "temporaries at once (tmp.adam)");
      break;
  }
  if (m.num_moe_experts.value_or(0) > 0) e.assumptions.push_back(RoutingAssumption(job));
  if (m.cuda_graph_impl == model::CudaGraphImpl::kTransformerEngine ||
      m.cuda_graph_impl == model::CudaGraphImpl::kLocal) {
    e.assumptions.push_back(
        "CUDA graphs: the eager warm-up iterations set the allocated peak; "
        "graph pools add reserved, not allocated, memory");
  }
}

}  // namespace

Status FillGpuFacts(const model::Job& job, Estimate& e) {
  if (e.gpu_capacity_bytes > 0) return OkStatus();
  MEMTUNE_TRY(auto gpu, LookUpGpu(job));
  e.gpu_capacity_bytes = gpu.capacity_bytes;
  return OkStatus();
}

Result<Estimate> EstimateAccurate(const model::Job& job, const EstimateOptions& options) {
  if (job.memtune.framework == model::Framework::kFsdp2) {
    MEMTUNE_TRY(auto fsdp2, EstimateFsdp2(job, options));
    MEMTUNE_RETURN_IF_ERROR(FillGpuFacts(job, fsdp2));
    return fsdp2;
  }
  MEMTUNE_RETURN_IF_ERROR(CheckSupported(job));
  MEMTUNE_TRY(const auto layout, BuildPipelineChunks(job.model));
  MEMTUNE_TRY(auto gpu, LookUpGpu(job));
  const JobFacts facts = MakeJobFacts(job, options.num_microbatches);
  Estimate e;
  e.mode = Mode::kAccurate;
  e.gpu_capacity_bytes = gpu.capacity_bytes;
  const ModelStateRules state_rules = MakeModelStateRules(job, gpu.fp8_transpose);
  e.ranks.resize(layout.pp_size);
  std::optional<LayerPasses> passes;  // the schedule walk's layer passes, once per job
  if (facts.walk_schedule) passes = MakeLayerPasses(job, facts);
  for (int r = 0; r < layout.pp_size; ++r) {
    RankEstimate& rank = e.ranks[r];
    EstimateRank(job, facts, r, layout.Stage(r), state_rules, options.with_explanations,
                 passes ? &*passes : nullptr, rank);
    if (rank.allocated_bytes > e.peak_allocated_bytes || r == 0) {
      e.peak_allocated_bytes = rank.allocated_bytes;
      e.peak_pp_rank = rank.pp_rank;
    }
  }
  if (options.with_explanations) AddAssumptions(job, e);
  return e;
}

}  // namespace memtune::estimate::internal
