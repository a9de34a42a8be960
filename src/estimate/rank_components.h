// One pipeline rank's estimate, component by component (private to the estimator).
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "memtune/estimate/estimate.h"
#include "memtune/estimate/schedule.h"
#include "rank_walk.h"
#include "tensors/job_facts.h"
#include "tensors/model_state.h"

namespace memtune::estimate::internal {

// Fills `rank` (default-constructed) for pipeline rank `pp_rank` built from `chunks`: model
// state (MakeModelStateRules(job, fp8 transpose kept)), activations held at the rank's peak
// and the transient then; or the optimizer-step peak when higher. (Filled in place: the
// caller's vector holds it, nothing is moved.)
// `with_explanations`: EstimateOptions::with_explanations. `passes`: MakeLayerPasses when
// facts.walk_schedule (the schedule is walked), else unused (may be null).
void EstimateRank(const model::Job& job, const tensors::JobFacts& facts, int pp_rank,
                  std::span<const ModelChunk> chunks, const tensors::ModelStateRules& state_rules,
                  bool with_explanations, const LayerPasses* passes, RankEstimate& rank);

}  // namespace memtune::estimate::internal
