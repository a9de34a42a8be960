// One pipeline rank's activations walked through its schedule (private to the estimator):
// for jobs whose layers differ by micro-batch (routing imbalance, tensors/moe_load.h), where
// the closed form of rank_components.cc (held micro-batches x per-layer bytes + the largest
// working set) no longer applies. Both walks follow the trace generator's order
// (src/synth/generator.cc ForwardChunk / BackwardChunk) through a steady-state iteration
// (the pipeline's carried inputs of the previous one held) and keep the highest point of
// the activation bytes, so the estimate equals the trace's peak:
// - WalkRankActivations goes layer by layer: each layer pass's highest points and net
//   change are affine in its expert rows (tensors/moe_sizes.h whole_rows), found once per
//   layer kind by running the layer walk (tensors/layer_walk.h) at two loads;
// - WalkRankBytes runs the layer walk itself, tensor by tensor (the reference; used when
//   the sizes are not whole bytes per row).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "memtune/estimate/schedule.h"
#include "memtune/model/job.h"
#include "tensors/activations.h"
#include "tensors/job_facts.h"
#include "tensors/moe_sizes.h"

namespace memtune::estimate::internal {

// What is live at the highest point of a rank's activations.
struct ActivationPeak {
  std::int64_t bytes = 0;      // everything below, summed
  tensors::ActBytes held{};    // the layers' saved tensors, per tensor
  std::int64_t embedding = 0;  // token ids (+ dropout masks) of the micro-batches in flight
  std::int64_t output = 0;     // final-norm and output-layer inputs
  std::int64_t logits = 0;     // logits kept for the loss backward
  std::int64_t deferred = 0;   // defer_embedding_wgrad_compute's kept tensors
  std::int64_t carried = 0;    // pipeline inputs and gradients kept between iterations
  std::int64_t transient = 0;  // the working set of the pass running then
  int in_flight = 0;           // micro-batch-chunks forwarded and not yet backward
};

// Each layer kind's passes, found once per job (every rank's walk reads them).
// bytes = a + b x, x the layer's expert rows minus the balanced rows.
struct Line {
  std::int64_t a = 0, b = 0;
  std::int64_t At(std::int64_t x) const { return a + b * x; }
};

// One layer pass (forward or backward) of one layer kind: its highest points and its net
// change as lines in x, dominated lines dropped (x >= -balanced rows).
struct PassLines {
  std::vector<Line> highs;
  Line net;
  std::int64_t High(std::int64_t x) const {
    std::int64_t most = highs.empty() ? 0 : highs.front().At(x);
    for (const Line& l : highs) most = std::max(most, l.At(x));
    return most;
  }
};

struct KindLines {
  PassLines forward, backward;
};

// The output layer's passes (sizes fixed).
struct OutputLines {
  std::int64_t fwd_high = 0, fwd_net = 0;
  std::int64_t bwd_high[2] = {}, bwd_net[2] = {};  // [deferred]
};

struct LayerPasses {
  bool ok = true;  // false: a size not whole bytes per row (WalkRankBytes walks instead)
  tensors::MoeLayerSizes moe_sizes[2];  // [fp8 layer]
  KindLines lines[2][2];                // [moe][fp8 layer]
  OutputLines output;
  tensors::ActBytes dense_kept[2] = {};   // a dense layer's kept tensors, [fp8 layer]
  tensors::ActBytes moe_per_row[2] = {};  // a MoE layer's kept bytes per expert row
};

LayerPasses MakeLayerPasses(const model::Job& job, const tensors::JobFacts& facts);

// Walks pipeline rank `pp_rank` (its `stage` chunks) of a Megatron job whose layers keep
// all their saved tensors (no full recompute, no offloading: tensors/moe_load.h
// MakeMoeLoadModel's coverage); `passes`: MakeLayerPasses(job, facts). The live categories
// of the layer pass running at the peak count as its transient.
ActivationPeak WalkRankActivations(const model::Job& job, const tensors::JobFacts& facts,
                                   const LayerPasses& passes, std::span<const ModelChunk> stage,
                                   int pp_rank);
ActivationPeak WalkRankBytes(const model::Job& job, const tensors::JobFacts& facts,
                             std::span<const ModelChunk> stage, int pp_rank);

}  // namespace memtune::estimate::internal
