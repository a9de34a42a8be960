// One pipeline rank's estimate, component by component (private to the estimator).
#pragma once

#include <array>
#include <cstdint>

#include "activations.h"
#include "memtune/estimate/estimate.h"
#include "memtune/estimate/schedule.h"
#include "model_state.h"

namespace memtune::estimate::internal {

// What every rank shares, computed once per job (the hot path reuses it).
struct JobFacts {
  ActContext act;
  ParamCatalog params;
  ActBytes layer[2][2] = {};            // [moe][fp8 layer]
  std::int64_t layer_total[2][2] = {};  // SumBytes(layer[moe][fp8])
  int uniform_kind = -1;                // moe*2+fp8 when every layer is alike, else -1
  std::int64_t workspace[2][2] = {};    // backward working set, [moe][fp8 layer]
  std::int64_t checkpoint_input = 0;    // full recompute: one unit's saved input
  std::int64_t embedding_per_mb = 0;    // token ids + embedding dropout mask
  std::int64_t output_hidden_per_mb = 0;  // final-norm input + output-layer input
  std::int64_t logits_per_mb = 0;       // logits kept for the loss backward
  std::int64_t logits_transient = 0;    // bf16 logits / their gradient, one micro-batch
  std::int64_t num_microbatches = 1;
  int group_size = 1;                   // microbatch_group_size_per_vp_stage
  bool with_explanations = true;        // EstimateOptions::with_explanations
};

JobFacts MakeJobFacts(const model::Job& job, const EstimateOptions& options);

// Model state, activations held at the rank's peak and the transient then; or the
// optimizer-step peak when higher.
RankEstimate EstimateRank(const model::Job& job, const JobFacts& facts, const StageLayout& stage,
                          bool fp8_transpose);

}  // namespace memtune::estimate::internal
