// One transformer layer's time, module by module (docs/step-time.md, "One layer").
#include "steptime/layer_time.h"

#include <algorithm>
#include <string>
#include <string_view>

#include "memtune/model/parameters.h"
#include "steptime/layer_parts.h"

namespace memtune::steptime {

PassTime& PassTime::operator+=(const PassTime& other) {
  gemm += other.gemm;
  attention += other.attention;
  elementwise += other.elementwise;
  comm_exposed += other.comm_exposed;
  host += other.host;
  stall += other.stall;
  return *this;
}

LayerContext MakeLayerContext(const model::Job& job, const Hardware& hw) {
  const model::ModelConfig& m = job.model;
  LayerContext ctx;
  ctx.job = &job;
  ctx.hw = hw;
  ctx.tp = std::max(1, m.tensor_model_parallel_size);
  ctx.cp = std::max(1, m.context_parallel_size);
  ctx.ep = std::max(1, m.expert_model_parallel_size);
  ctx.etp = std::max(1, model::ExpertTensorParallelSize(job));
  ctx.sp = m.sequence_parallel && ctx.tp > 1;
  ctx.tp_overlap = m.tp_comm_overlap && ctx.sp;
  ctx.tokens =
      static_cast<double>(job.train.micro_batch_size) * static_cast<double>(m.seq_length) / ctx.cp;
  ctx.tokens_sp = ctx.sp ? ctx.tokens / ctx.tp : ctx.tokens;
  // Megatron's default rank order tp-cp-ep-dp-pp (parallel_state.initialize_model_parallel):
  // TP ranks are adjacent, CP ranks tp apart; expert ranks follow etp-ep-dp-pp.
  ctx.tp_link = GroupLink(ctx.tp, 1, hw);
  ctx.cp_link = GroupLink(ctx.cp, ctx.tp, hw);
  ctx.ep_link = GroupLink(ctx.ep, ctx.etp, hw);
  ctx.frozen = job.peft.has_value();
  ctx.fsdp2 = job.memtune.framework == model::Framework::kFsdp2;
  return ctx;
}

LayerTime TransformerLayerTime(const LayerContext& ctx, bool moe_layer, GemmDtype dtype,
                               bool recompute_full) {
  const model::Job& job = *ctx.job;
  const std::vector<ModuleTime> modules = LayerModules(ctx, moe_layer, dtype);
  const bool selective = job.model.recompute_granularity == model::RecomputeGranularity::kSelective;
  const auto& chosen = job.model.recompute_modules;
  LayerTime out;
  for (const ModuleTime& module : modules) {
    out.forward += module.forward;
    out.backward += module.backward;
    const bool replayed =
        recompute_full || (selective && std::find(chosen.begin(), chosen.end(),
                                                  module.recompute_name) != chosen.end());
    if (replayed) out.recompute += module.forward;
  }
  if (ctx.fsdp2) ApplyFsdp2Checkpoint(job.memtune.fsdp2, modules, out);
  if (moe_layer) out.forward.stall = DispatchSyncStall(job, modules);
  out.recompute.stall = out.recompute.Gpu() > 0 ? out.forward.stall : 0;
  return out;
}

}  // namespace memtune::steptime
