// PredictStepTime: layers -> pipeline ranks -> schedule -> data parallel and optimizer.
#include "memtune/steptime/step_time.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "memtune/estimate/schedule.h"
#include "memtune/model/parameters.h"
#include "steptime/flops.h"
#include "steptime/hardware.h"
#include "steptime/layer_time.h"
#include "steptime/step_terms.h"

namespace memtune::steptime {
namespace {

GemmDtype JobGemmDtype(const model::Job& job) {
  if (job.model.fp4 != model::Fp4Format::kNone) return GemmDtype::kFp4;
  if (job.model.fp8 != model::Fp8Format::kNone) return GemmDtype::kFp8;
  if (job.memtune.framework == model::Framework::kFsdp2 && job.memtune.fsdp2.float8) {
    return GemmDtype::kFp8;
  }
  return GemmDtype::kBf16;
}

// Whether global layer `layer` is recomputed in full (MCore recompute_granularity full:
// uniform recomputes every layer, block the first recompute_num_layers of each chunk).
bool FullRecompute(const model::ModelConfig& m, int index_in_chunk) {
  if (m.recompute_granularity != model::RecomputeGranularity::kFull) return false;
  if (m.recompute_method == model::RecomputeMethod::kBlock) {
    return index_in_chunk < m.recompute_num_layers.value_or(0);
  }
  return true;
}

class LayerCache {
 public:
  explicit LayerCache(const LayerContext& ctx) : ctx_(ctx) {}
  const LayerTime& Get(bool moe, GemmDtype dtype, bool full) {
    const auto key = std::make_tuple(moe, dtype, full);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      it = cache_.emplace(key, TransformerLayerTime(ctx_, moe, dtype, full)).first;
    }
    return it->second;
  }

 private:
  const LayerContext& ctx_;
  std::map<std::tuple<bool, GemmDtype, bool>, LayerTime> cache_;
};

// defer_embedding_wgrad_compute (MCore, with wgrad_deferral_limit micro-batches; 0 = all):
// the last stage's output-layer weight-gradient GEMMs of the last micro-batches run in the
// pipeline flush, where that stage would idle, so they leave the steady state; at most the
// bubble's length is hidden. Seconds removed from the critical rank's GEMM time.
double DeferredOutputWgrad(const LayerContext& ctx,
                           const std::vector<estimate::StageLayout>& stages, int critical,
                           double mean_wall, double microbatches) {
  const model::ModelConfig& m = ctx.job->model;
  const int p = static_cast<int>(stages.size());
  if (!m.defer_embedding_wgrad_compute || p <= 1 || ctx.frozen) return 0;
  bool has_output = false;
  for (const estimate::ModelChunk& chunk : stages[critical].chunks) has_output |= chunk.has_output;
  if (!has_output) return 0;
  const double h = static_cast<double>(m.hidden_size);
  const double vocab = static_cast<double>(model::PaddedVocabSize(*ctx.job)) / ctx.tp;
  const double wgrad = GemmSeconds(vocab, h, ctx.tokens, GemmDtype::kBf16, ctx.hw);
  const double count = m.wgrad_deferral_limit > 0
                           ? std::min<double>(m.wgrad_deferral_limit, microbatches)
                           : microbatches;
  const double v = std::max(1, m.virtual_pipeline_model_parallel_size.value_or(1));
  const double bubble = (p - 1) / v * mean_wall;
  return std::min(count * wgrad, bubble);
}

void AddLayer(const LayerTime& t, RankWork& w) {
  w.forward += t.forward;
  w.backward += t.backward;
  w.recompute += t.recompute;
  w.forward_wall += t.forward.Wall();
  PassTime backward = t.backward;
  backward += t.recompute;
  w.backward_wall += backward.Wall();
}

RankWork StageWork(const LayerContext& ctx, const estimate::StageLayout& stage,
                   const std::vector<bool>& moe, LayerCache& cache) {
  const model::Job& job = *ctx.job;
  const model::ModelConfig& m = job.model;
  const GemmDtype dtype = JobGemmDtype(job);
  const int bf16_first = m.first_last_layers_bf16 ? m.num_layers_at_start_in_bf16 : 0;
  const int bf16_last = m.first_last_layers_bf16 ? m.num_layers_at_end_in_bf16 : 0;
  RankWork w;
  for (const estimate::ModelChunk& chunk : stage.chunks) {
    if (chunk.has_embedding) AddLayer(EmbeddingTime(ctx), w);
    for (int i = 0; i < chunk.num_layers; ++i) {
      const int layer = chunk.first_layer + i;
      const bool is_moe = layer < static_cast<int>(moe.size()) && moe[layer];
      const bool bf16 = layer < bf16_first || layer >= m.num_layers - bf16_last;
      AddLayer(cache.Get(is_moe, bf16 ? GemmDtype::kBf16 : dtype, FullRecompute(m, i)), w);
    }
    for (int i = 0; i < chunk.num_mtp_layers; ++i) {
      AddLayer(cache.Get(!moe.empty() && moe.back(), dtype, false), w);
    }
    if (chunk.has_output) AddLayer(OutputLayerTime(ctx), w);
  }
  return w;
}

}  // namespace

double StepTime::TflopsPerGpu(FlopsFormula formula, int world_size) const {
  if (step_time_s <= 0 || world_size <= 0) return 0;
  const double flops =
      formula == FlopsFormula::kCausal ? model_flops_causal : model_flops_noncausal;
  return flops / step_time_s / world_size / 1e12;
}

double StepTime::Mfu(FlopsFormula formula, int world_size) const {
  return peak_bf16_tflops > 0 ? TflopsPerGpu(formula, world_size) / peak_bf16_tflops : 0;
}

Result<FlopsFormula> ParseFlopsFormula(std::string_view name, std::string_view field) {
  if (name == "causal") return FlopsFormula::kCausal;
  if (name == "noncausal") return FlopsFormula::kNoncausal;
  return InvalidInput(std::string(field),
                      std::string("'").append(name) + "' is not a FLOP convention",
                      "use causal or noncausal");
}

Status JobHardwareCheck(const model::Job& job) {
  MEMTUNE_RETURN_IF_ERROR(JobHardware(job));
  return OkStatus();
}

Result<StepTime> PredictStepTime(const model::Job& job) {
  MEMTUNE_TRY(const Hardware hw, JobHardware(job));
  MEMTUNE_TRY(const std::vector<estimate::StageLayout> stages,
              estimate::BuildPipelineLayout(job.model));
  const LayerContext ctx = MakeLayerContext(job, hw);
  const std::vector<bool> moe = model::MoeLayerPattern(job.model);
  LayerCache cache(ctx);
  std::vector<RankWork> work;
  for (const estimate::StageLayout& stage : stages)
    work.push_back(StageWork(ctx, stage, moe, cache));
  int critical = 0;
  double mean = 0;
  for (std::size_t r = 0; r < work.size(); ++r) {
    mean += work[r].Wall() / static_cast<double>(work.size());
    if (work[r].Wall() > work[critical].Wall()) critical = static_cast<int>(r);
  }
  const RankWork& w = work[critical];
  const double m = static_cast<double>(std::max<std::int64_t>(1, model::NumMicrobatches(job)));
  StepTime out;
  out.critical_pp_rank = critical;
  out.peak_bf16_tflops = hw.bf16_flops / 1e12;
  const ModelFlops flops = GlobalBatchFlops(job);
  out.model_flops_causal = flops.causal;
  out.model_flops_noncausal = flops.noncausal;

  // Compute of the critical rank over all micro-batches, split by kind; what the CPU adds
  // beyond the GPU (launch-bound layers) is its own term.
  const double gpu_wall = w.forward.Gpu() + w.backward.Gpu() + w.recompute.Gpu();
  const double deferred = DeferredOutputWgrad(ctx, stages, critical, mean, m);
  AddTerm(out, "gemm", m * (w.forward.gemm + w.backward.gemm) - deferred,
          "linear layers, fwd + bwd");
  AddTerm(out, "attention", m * (w.forward.attention + w.backward.attention),
          "flash attention, fwd + bwd");
  AddTerm(out, "elementwise", m * (w.forward.elementwise + w.backward.elementwise),
          "norms, activations, casts, rotary, residuals, loss (HBM-bound)");
  AddTerm(out, "layer_comm_exposed", m * (w.forward.comm_exposed + w.backward.comm_exposed),
          "TP / CP / EP communication not hidden behind compute");
  AddTerm(out, "recompute", m * w.recompute.Gpu(), "forward work re-run in the backward");
  AddTerm(out, "host_bound", m * std::max(0.0, w.Wall() - gpu_wall),
          "CPU dispatch slower than the GPU (eager ops, small kernels)");
  AddPipelineTerms(ctx, work, mean, m, out);
  AddDataParallelTerms(ctx, stages[critical], w.forward_wall, w.backward_wall, m, out);
  const double world = std::max(1, job.memtune.world_size);
  out.tokens_per_s_per_gpu = static_cast<double>(job.train.global_batch_size) *
                             static_cast<double>(job.model.seq_length) / out.step_time_s / world;
  return out;
}

}  // namespace memtune::steptime
