// Step-level terms: pipeline bubble and send/recv, data-parallel traffic, optimizer.
#include "steptime/step_terms.h"

#include <algorithm>

#include "memtune/model/parameters.h"

namespace memtune::steptime {
namespace {

// Bytes per element (FP4: half a byte, where model::DtypeBytes rounds up).
double ElementBytes(model::Dtype dtype) {
  return dtype == model::Dtype::kFp4 ? 0.5 : model::DtypeBytes(dtype);
}

struct StageParams {
  double dense = 0;   // this rank's share of non-expert parameters
  double expert = 0;  // this rank's share of routed-expert parameters
  double dense_per_layer = 0;
};

class ParamCounter : public model::ParamTensorSink {
 public:
  ParamCounter(int tp, int ep_etp) : tp_(tp), ep_etp_(ep_etp) {}
  void Add(const model::ParamTensor& t) override {
    const double total = static_cast<double>(t.Total());
    if (t.is_buffer) return;
    if (t.expert) {
      expert += total / ep_etp_;
    } else {
      dense += t.tp_split == model::TpSplit::kReplicated ? total : total / tp_;
    }
  }
  double dense = 0, expert = 0;

 private:
  double tp_, ep_etp_;
};

StageParams ParamsOf(const LayerContext& ctx, const estimate::StageLayout& stage) {
  const model::ModelConfig& m = ctx.job->model;
  const std::vector<bool> moe = model::MoeLayerPattern(m);
  ParamCounter counter(ctx.tp, ctx.ep * ctx.etp);
  const std::int64_t vocab = model::PaddedVocabSize(*ctx.job);
  double layers = 0;
  for (const estimate::ModelChunk& chunk : stage.chunks) {
    for (int i = 0; i < chunk.num_layers + chunk.num_mtp_layers; ++i) {
      const int layer = chunk.first_layer + i;
      const bool is_moe =
          layer < static_cast<int>(moe.size()) ? moe[layer] : (!moe.empty() && moe.back());
      model::AddTransformerLayerParameters(m, is_moe, counter);
      layers += 1;
    }
  }
  StageParams p;
  p.dense_per_layer = layers > 0 ? counter.dense / layers : 0;
  for (const estimate::ModelChunk& chunk : stage.chunks) {
    if (chunk.has_embedding) model::AddEmbeddingParameters(m, vocab, counter);
    if (chunk.has_output) model::AddOutputParameters(m, vocab, counter);
  }
  p.dense = counter.dense;
  p.expert = counter.expert;
  return p;
}

// Bytes Adam (or SGD) moves per parameter in one step: main parameters, gradients and
// moments read and written, the BF16 model copy written, the gradient buffer zeroed
// (MCore DistributedOptimizer.step / TE FusedAdam).
double OptimizerBytesPerParam(const model::Job& job) {
  const model::OptimizerConfig& o = job.optimizer;
  const bool mixed = o.bf16 || o.fp16 || job.model.bf16 || job.model.fp16;
  const double main =
      ElementBytes(o.use_precision_aware_optimizer ? o.main_params_dtype : model::Dtype::kFp32);
  const double grad =
      ElementBytes(o.use_precision_aware_optimizer ? o.main_grads_dtype : model::Dtype::kFp32);
  double bytes = 2 * main + 2 * grad + (mixed ? 2 : 0);
  if (o.optimizer == model::Optimizer::kAdam) {
    const bool aware = o.use_precision_aware_optimizer;
    bytes += 2 * ElementBytes(aware ? o.exp_avg_dtype : model::Dtype::kFp32);
    bytes += 2 * ElementBytes(aware ? o.exp_avg_sq_dtype : model::Dtype::kFp32);
  }
  return bytes;
}

}  // namespace

void AddTerm(StepTime& out, std::string_view name, double seconds, std::string detail) {
  if (seconds <= 0) return;
  out.terms.push_back({name, seconds, std::move(detail)});
  out.step_time_s += seconds;
}

void AddPipelineTerms(const LayerContext& ctx, const std::vector<RankWork>& work, double mean_wall,
                      double microbatches, StepTime& out) {
  const int p = static_cast<int>(work.size());
  if (p <= 1) return;
  const model::ModelConfig& m = ctx.job->model;
  const double v = std::max(1, m.virtual_pipeline_model_parallel_size.value_or(1));
  // 1F1B: p - 1 micro-batch slots of fill and drain; interleaving divides them by v
  // (Narayanan et al. 2021, section 2.2).
  AddTerm(out, "pp_bubble", (p - 1) / v * mean_wall,
          "pipeline fill and drain: (pp - 1) / vpp micro-batch slots");
  // One activation (and one gradient) per chunk boundary and micro-batch, [seq/cp(/tp with
  // SP), mbs, hidden] in BF16; pipeline neighbours are world / pp ranks apart.
  const double h = static_cast<double>(m.hidden_size);
  const int world = std::max(1, ctx.job->memtune.world_size);
  const Link link = GroupLink(2, world / p, ctx.hw);
  const double send = CollectiveSeconds(Collective::kSendRecv, ctx.tokens_sp * h * 2, 2, link);
  const bool overlapped = v > 1 && !m.batch_p2p_comm.value_or(false);
  const double exposed = (overlapped ? 1.0 : microbatches) * 2 * v * send;
  AddTerm(out, "pp_p2p", exposed,
          overlapped ? "send/recv overlapped with compute (overlap_p2p_comm): warm-up only"
                     : "blocking send/recv of activations and gradients");
}

void AddDataParallelTerms(const LayerContext& ctx, const estimate::StageLayout& stage,
                          double forward_wall, double backward_wall, double microbatches,
                          StepTime& out) {
  const model::Job& job = *ctx.job;
  const StageParams params = ParamsOf(ctx, stage);
  const bool fsdp2 = ctx.fsdp2;
  const bool mfsdp = job.ddp.use_megatron_fsdp && job.ddp.data_parallel_sharding_strategy ==
                                                      model::ShardingStrategy::kOptimGradsParams;
  const int dp = std::max(1, model::DataParallelSize(job)) * ctx.cp;
  const int edp = std::max(1, model::ExpertDataParallelSize(job));
  const int shard =
      fsdp2 && job.memtune.fsdp2.shard_degree > 0 ? job.memtune.fsdp2.shard_degree * ctx.cp : dp;
  const Link dp_link = GroupLink(dp, ctx.tp, ctx.hw);
  const Link edp_link = GroupLink(edp, ctx.ep * ctx.etp, ctx.hw);
  const bool distopt = job.optimizer.use_distributed_optimizer ||
                       job.ddp.use_distributed_optimizer || fsdp2 || job.ddp.use_megatron_fsdp;
  const bool frozen = ctx.frozen;
  const double grad_bytes = fsdp2 ? ElementBytes(job.memtune.fsdp2.reduce_dtype)
                            : job.ddp.grad_reduce_in_fp32 ? 4
                                                          : 2;
  const double param_bytes = job.model.fp8_param_gather ? 1 : 2;

  // The optimizer step over this rank's shard.
  const double dense_opt =
      frozen ? 0 : (distopt ? params.dense / (fsdp2 ? shard : dp) : params.dense);
  const double expert_opt = frozen ? 0 : (distopt ? params.expert / edp : params.expert);
  double opt_params = dense_opt + expert_opt;
  if (frozen && job.peft) opt_params = 0;  // adapters only: negligible
  const double offload =
      job.optimizer.optimizer_cpu_offload ? job.optimizer.optimizer_offload_fraction : 0;
  const double gpu_opt =
      MemorySeconds((1 - offload) * opt_params * OptimizerBytesPerParam(job), ctx.hw);
  AddTerm(out, "optimizer", gpu_opt, "optimizer step on the GPU (HBM-bound)");
  if (offload > 0) {
    const double cpu = offload * opt_params * kCpuAdamSecondsPerParam;
    const double link = ctx.hw.host_link_bytes_per_s * kHostLinkEfficiency;
    const double copies = offload * opt_params * (4 + 2) / link;  // grads down, params up
    const double total =
        job.optimizer.overlap_cpu_optimizer_d2h_h2d ? std::max(cpu, copies) : cpu + copies;
    AddTerm(out, "optimizer_offload", total, "CPU Adam and its PCIe copies");
  }
  if (frozen) return;  // PEFT: only the adapters' gradients are reduced

  if (fsdp2 || mfsdp) {
    // Parameters gathered per layer before its forward and again before its backward,
    // gradients reduce-scattered after it, prefetched under the neighbouring layer's compute
    // (torch FSDP2 / Megatron-FSDP), every micro-batch.
    const Link link = GroupLink(shard, ctx.tp, ctx.hw);
    const double layers = std::max(1.0, static_cast<double>(stage.NumLayers()));
    const double ag =
        CollectiveSeconds(Collective::kAllGather, params.dense_per_layer * 2, shard, link);
    const double rs = CollectiveSeconds(Collective::kReduceScatter,
                                        params.dense_per_layer * grad_bytes, shard, link);
    const double exposed = layers * (std::max(0.0, ag - forward_wall / layers) +
                                     std::max(0.0, ag + rs - backward_wall / layers));
    AddTerm(out, "dp_comm_exposed", microbatches * exposed,
            "FSDP parameter all-gather and gradient reduce-scatter not hidden per layer");
    return;
  }
  const Collective grad_op = distopt ? Collective::kReduceScatter : Collective::kAllReduce;
  const double reduce = CollectiveSeconds(grad_op, params.dense * grad_bytes, dp, dp_link) +
                        CollectiveSeconds(grad_op, params.expert * grad_bytes, edp, edp_link);
  const double reduce_exposed =
      job.ddp.overlap_grad_reduce ? std::max(0.0, reduce - backward_wall) : reduce;
  AddTerm(out, "dp_grad_reduce", reduce_exposed,
          job.ddp.overlap_grad_reduce ? "gradient reduction beyond the last backward"
                                      : "gradient reduction after the backward");
  if (!distopt) return;
  const double gather =
      CollectiveSeconds(Collective::kAllGather, params.dense * param_bytes, dp, dp_link) +
      CollectiveSeconds(Collective::kAllGather, params.expert * param_bytes, edp, edp_link);
  double window = 0;
  if (job.optimizer.overlap_param_gather_with_optimizer_step) {
    window = gpu_opt;
  } else if (job.ddp.overlap_param_gather) {
    window = forward_wall;
  }
  AddTerm(out, "dp_param_gather", std::max(0.0, gather - window),
          "distributed-optimizer parameter all-gather not hidden");
}

}  // namespace memtune::steptime
