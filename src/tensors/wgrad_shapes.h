// The weight shapes TE's weight-gradient placeholders are keyed by (memtune_tensors
// internal API; docs/estimator.md §5b). Shared by the parameter catalog, which collects one
// layer's shapes in its pass over the tensors, and the workspace rules.
#pragma once

#include <array>
#include <cstdint>

#include "memtune/model/parameters.h"

namespace memtune::tensors {

// Weight-gradient placeholders. With gradient_accumulation_fusion a Transformer Engine
// linear's backward (and MCore's ColumnParallelLinear's: the output layer) accumulates the
// weight gradient into main_grad itself and hands autograd a placeholder from TE's
// process-wide cache instead (TE module/base.py get_dummy_wgrad, TE >= 2.3: one tensor per
// (main_grad shape, dtype), created at the first backward that asks for it and never
// freed; MCore tensor_parallel/layers.py uses it since 2025-08). MCore's DDP hook then
// drops param.grad, so the placeholder is all that stays. A rank holds one per distinct
// local weight shape: qkv, proj, fc1 and fc2 of a dense layer are four, however many layers.
struct WgradShape {         // (no initializers: a WgradShapes' unused entries are never read)
  std::int64_t rows, cols;  // the local (TP/ETP-sharded) weight shape
  int dtype_bytes;          // bytes per element
  std::int64_t Bytes() const { return rows * cols * dtype_bytes; }
  bool operator==(const WgradShape&) const = default;
};
// The distinct shapes of one source, or of a rank (more than kMaxWgradShapes distinct
// shapes is beyond any layer this estimator builds; Add() then counts the extra ones into
// the last entry, so no byte is lost).
inline constexpr int kMaxWgradShapes = 24;
struct WgradShapes {
  std::array<WgradShape, kMaxWgradShapes> shapes;  // [0, count) are set
  int count = 0;
  void Add(const WgradShape& shape);  // no-op when already present
  void AddAll(const WgradShapes& other);
  std::int64_t Bytes() const;  // sum over the distinct shapes
};

// Adds `t`'s local shape when its backward hands autograd a placeholder: TE linears (every
// "linear_*" weight, the latent projections, MTP's eh_proj), not MCore's router (its own
// autograd function returns a real gradient) and not the embeddings (no in_features).
// Column-parallel (and vocabulary-parallel) weights split their output rows over TP,
// row-parallel ones their input columns; expert weights over expert TP.
void AddWgradShape(WgradShapes& out, const model::ParamTensor& t, int tp, int etp, int dtype_bytes);

}  // namespace memtune::tensors
