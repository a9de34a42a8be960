// The modules of one transformer layer, each timed for one micro-batch (docs/step-time.md,
// "One layer"): norms, attention linears, core attention, MLP or MoE parts, residual adds.
#pragma once

#include <string_view>
#include <vector>

#include "memtune/model/job.h"
#include "steptime/layer_time.h"

namespace memtune::steptime {

struct ModuleTime {
  // MCore recompute_modules names that re-run this module ("" = none), and the enclosing
  // one (e.g. "moe" for every part of the MoE layer).
  std::string_view recompute_name;
  std::string_view recompute_parent;
  // The cuda_graph_scope that captures it ("attn", "mlp", "moe", "moe_router",
  // "moe_preprocess").
  std::string_view graph_scope;
  PassTime forward;
  PassTime backward;
};

// The modules of one layer with CUDA-graph capture applied (captured modules cost one graph
// launch per scope instead of their eager dispatches).
std::vector<ModuleTime> LayerModules(const LayerContext& ctx, bool moe_layer, GemmDtype dtype);

// The forward's idle time from the D2H synchronisation of a dropless MoE dispatcher:
// alltoall and flex need the per-expert token counts on the host before they permute
// (MCore token_dispatcher.py, the sync point before the all-to-all), so the CPU stops
// running ahead: max(Gb, Hb) + max(Ga, Ha) - max(G, H) over the modules before / after it.
// 0 for the allgather dispatcher, a capacity factor (static shapes) or full-iteration graphs.
double DispatchSyncStall(const model::Job& job, const std::vector<ModuleTime>& modules);

// torchtitan activation checkpointing (memtune.fsdp2.activation_checkpoint): full re-runs
// the layer's forward, selective_op re-runs everything but the GEMMs and attention (the ops
// torchtitan's policy saves), selective_layer every second layer's forward.
void ApplyFsdp2Checkpoint(const model::Fsdp2Config& fsdp2, const std::vector<ModuleTime>& modules,
                          LayerTime& layer);

}  // namespace memtune::steptime
