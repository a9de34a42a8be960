// A MoE layer kind's tensor sizes at a given expert load (memtune_tensors internal API):
// the sizes of moe_load.h's expert rows, for the estimator's schedule walk and the trace.
#pragma once

#include <cstdint>

#include "tensors/layer_walk.h"
#include "tensors/moe_load.h"

namespace memtune::tensors {

// A MoE layer kind's sizes as an affine function of its expert rows: at(rows) = base +
// per_rows x (rows - balanced) / balanced, every tensor of LayerSizes (exact whenever a
// tensor is a whole number of bytes per row, as every one is).
struct MoeLayerSizes {
  LayerSizes base;                 // balanced routing (ActContext::rows_mult 1)
  LayerSizes per_rows;             // the part proportional to the rows (rows_mult 2 - 1)
  std::int64_t balanced_rows = 0;  // expert rows of one micro-batch, balanced
  // Every per_rows entry a whole number of bytes per row (so At is exactly affine: the
  // estimator's layer-by-layer walk relies on it, src/estimate/rank_walk.cc).
  bool whole_rows = true;
  LayerSizes At(std::int64_t rows) const;
};

MoeLayerSizes MakeMoeLayerSizes(const ActContext& ctx, bool fp8_layer);

}  // namespace memtune::tensors
