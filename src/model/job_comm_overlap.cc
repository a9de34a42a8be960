// comm_overlap: Megatron-Bridge's CommOverlapConfig, applied as its setup() applies it
// (src/megatron/bridge/training/comm_overlap.py @ 0685ff5: _get_model_comm_overlap_cfgs,
// _get_optimizer_overlap_cfgs, _override_user_cfgs).
#include <algorithm>
#include <string>

#include "model/job_parse_internal.h"
#include "model/job_values.h"

namespace memtune::model::internal {
namespace {

// A user value of the section: unset (absent or null) keeps Bridge's derived default.
Result<std::optional<bool>> OptionalBool(const YAML::Node& section, const char* name) {
  const YAML::Node v = section[name];
  if (!v || v.IsNull()) return std::optional<bool>();
  MEMTUNE_TRY(const bool b, ToBool(v, std::string("comm_overlap.") + name));
  return std::optional<bool>(b);
}

}  // namespace

Status ApplyCommOverlap(const YAML::Node& node, ParseContext& ctx) {
  if (!node || node.IsNull()) return OkStatus();
  if (!node.IsMap()) {
    return WrongType(node, "comm_overlap", "a mapping", "Bridge CommOverlapConfig fields");
  }
  JobSpec& s = ctx.spec;
  MEMTUNE_TRY(const auto tp_overlap, OptionalBool(node, "tp_comm_overlap"));
  MEMTUNE_TRY(const auto overlap_p2p, OptionalBool(node, "overlap_p2p_comm"));
  MEMTUNE_TRY(const auto batch_p2p, OptionalBool(node, "batch_p2p_comm"));
  MEMTUNE_TRY(const auto grad_reduce, OptionalBool(node, "overlap_grad_reduce"));
  MEMTUNE_TRY(const auto param_gather, OptionalBool(node, "overlap_param_gather"));
  MEMTUNE_TRY(const auto with_step, OptionalBool(node, "overlap_param_gather_with_optimizer_step"));
  MEMTUNE_TRY(const auto defer, OptionalBool(node, "defer_embedding_wgrad_compute"));
  const int tp = s.model.tensor_model_parallel_size;
  const int pp = s.model.pipeline_model_parallel_size;
  const int vp = s.model.virtual_pipeline_model_parallel_size.value_or(1);

  // Model side: TP overlap only with TP >= 2 and sequence parallelism (else Bridge warns and
  // turns it off); PP overlap from the layout; the deferral settings default off.
  bool tp_on = tp_overlap.value_or(false);
  if (tp_on && (tp < 2 || !s.model.sequence_parallel)) {
    ctx.Warn(std::string("comm_overlap.tp_comm_overlap is off: Bridge disables it ") +
             (tp < 2 ? "with tensor_model_parallel_size < 2" : "without sequence_parallel"));
    tp_on = false;
  }
  s.model.tp_comm_overlap = tp_on;
  ctx.present.insert("model.tp_comm_overlap");
  const bool p2p_overlap = overlap_p2p.value_or(pp > 1 && vp > 1);
  s.model.batch_p2p_comm = batch_p2p.value_or(pp > 1 && vp <= 1);
  if (p2p_overlap && *s.model.batch_p2p_comm) {
    ctx.Warn("comm_overlap: overlap_p2p_comm and batch_p2p_comm are both on; MCore allows one");
  }
  s.model.defer_embedding_wgrad_compute = defer.value_or(false);
  if (const YAML::Node limit = node["wgrad_deferral_limit"]; limit && !limit.IsNull()) {
    MEMTUNE_TRY(const std::int64_t v,
                ToInt(limit, "comm_overlap.wgrad_deferral_limit", -1, 1 << 20));
    s.model.wgrad_deferral_limit = static_cast<int>(std::max<std::int64_t>(0, v));
  }

  // Data-parallel side: only with the distributed optimizer; on by default when the
  // data-parallel size exceeds 1.
  const bool distopt = s.optimizer.use_distributed_optimizer || s.ddp.use_distributed_optimizer;
  if (!distopt) return OkStatus();
  int dp = 1;
  if (s.memtune.world_size) {
    const int model_parallel = std::max(1, tp * pp * s.model.context_parallel_size);
    dp = std::max(1, *s.memtune.world_size / model_parallel);
  }
  s.ddp.overlap_grad_reduce = grad_reduce.value_or(dp > 1);
  s.ddp.overlap_param_gather = param_gather.value_or(dp > 1);
  s.optimizer.overlap_param_gather_with_optimizer_step = with_step.value_or(false);
  ctx.present.insert("ddp.overlap_grad_reduce");
  ctx.present.insert("ddp.overlap_param_gather");
  return OkStatus();
}

}  // namespace memtune::model::internal
