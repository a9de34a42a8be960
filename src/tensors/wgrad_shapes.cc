// Placeholder shapes (docs/estimator.md §5b). Sources: TransformerEngine d0067d0
// pytorch/module/base.py get_dummy_wgrad and the linear modules' backward; Megatron-LM
// d98e8a6 tensor_parallel/layers.py.
#include "tensors/wgrad_shapes.h"

#include <algorithm>
#include <cstring>

namespace memtune::tensors {
namespace {

// The local shape of a linear weight on its rank: column-parallel (and vocabulary-parallel)
// weights split their output rows, row-parallel ones their input columns; expert weights
// split over expert TP instead of TP.
WgradShape LocalShape(const model::ParamTensor& t, int tp, int etp, int dtype_bytes) {
  const std::int64_t in = t.in_features, out = t.elements / t.in_features;
  const std::int64_t split = std::max(1, t.expert ? etp : tp);
  switch (t.tp_split) {
    case model::TpSplit::kColumn:
    case model::TpSplit::kVocab:
      return {out / split, in, dtype_bytes};
    case model::TpSplit::kRow:
      return {out, in / split, dtype_bytes};
    case model::TpSplit::kReplicated:
      break;
  }
  return {out, in, dtype_bytes};
}

}  // namespace

void AddWgradShape(WgradShapes& out, const model::ParamTensor& t, int tp, int etp,
                   int dtype_bytes) {
  if (t.in_features <= 0 || t.is_buffer || std::strncmp(t.name, "mlp.router.", 11) == 0) return;
  out.Add(LocalShape(t, tp, etp, dtype_bytes));
}

void WgradShapes::Add(const WgradShape& shape) {
  if (shape.Bytes() <= 0) return;
  for (int i = 0; i < count; ++i) {
    if (shapes[i] == shape) return;
  }
  if (count < kMaxWgradShapes) {
    shapes[count++] = shape;
  } else {  // (see the header: bytes kept in the last entry)
    WgradShape& last = shapes[kMaxWgradShapes - 1];
    last = {1, last.Bytes() + shape.Bytes(), 1};
  }
}

void WgradShapes::AddAll(const WgradShapes& other) {
  for (int i = 0; i < other.count; ++i) Add(other.shapes[i]);
}

std::int64_t WgradShapes::Bytes() const {
  std::int64_t total = 0;
  for (int i = 0; i < count; ++i) total += shapes[i].Bytes();
  return total;
}

}  // namespace memtune::tensors
