// Routing-dependent expert loads (memtune_tensors internal API): how many expert rows
// (received token copies) the modelled rank computes in each MoE layer and micro-batch, and
// (moe_sizes.h) the layer's tensor sizes at that load. The estimator walks the schedule with them
// (src/estimate/rank_walk.cc); the trace generator allocates them (src/synth/generator.cc).
//
// The model (docs/estimator.md "Routing imbalance"): each expert's share of a micro-batch's
// routed tokens is lognormal around the balanced share, log-load standard deviation
// `spread`, normalized over the expert-parallel group (the routed copies are conserved).
// The modelled rank is EP rank 0, holding experts 0 .. E/EP - 1; its load is the sum of its
// experts' shares, taken lognormal with the matched variance (Fenton-Wilkinson):
//   var(log load) = log(1 + (exp(spread^2) - 1) * (EP / E - 1 / E)),
// so it is exactly 1 when the rank holds every expert. A capacity factor caps the load
// (moe_expert_capacity_factor: tokens past an expert's capacity are dropped). One standard
// normal per (layer, micro-batch), from a counter-based hash of the two: the same routing
// every iteration, so each trace iteration repeats the first one's sizes.
#pragma once

#include <cstdint>

#include "memtune/model/job.h"
#include "tensors/activations.h"

namespace memtune::tensors {

// The spread a job is modelled with: memtune.moe_routing_spread when set; otherwise 0 under
// moe_router_force_load_balancing (random logits, MCore router.py apply_random_logits) and
// kDefaultRoutingSpread for a learned router. 0 for dense models.
inline constexpr double kDefaultRoutingSpread = 0.2;
double RoutingSpread(const model::Job& job);

struct MoeLoadModel {
  double rank_sigma = 0;  // standard deviation of the rank's log-load (0: balanced)
  double capacity = 0;    // the load's cap (moe_expert_capacity_factor; 0: none)
  // The most a rank can receive: every token of the group sends it min(top-k, E/EP)
  // copies, E / (top-k x E/EP) x that over balanced (0: none).
  double max_load = 0;
  bool active() const { return rank_sigma > 0; }
};

// The job's model. Inactive (balanced) for dense models, a zero spread, one EP rank, and
// the layer treatments it does not cover: full recompute, CPU or fine-grained activation
// offloading, and FSDP2 jobs.
MoeLoadModel MakeMoeLoadModel(const model::Job& job);

// The modelled rank's expert rows in MoE layer `layer` (global index) and micro-batch `mb`
// (within the iteration), given the balanced rows: round(balanced x load), load =
// min(capacity, max_load, exp(sigma z - sigma^2 / 2)). Returns `balanced_rows` when
// inactive.
std::int64_t ExpertRows(const MoeLoadModel& model, std::int64_t balanced_rows, int layer,
                        std::int64_t mb);

// Expert rows of one micro-batch under balanced routing: tokens / (SP) x top-k x ETP.
std::int64_t BalancedExpertRows(const ActContext& ctx);

}  // namespace memtune::tensors
