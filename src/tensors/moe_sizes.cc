// A MoE layer kind's sizes at a given expert load (moe_sizes.h).
#include "tensors/moe_sizes.h"

#include <array>
#include <cstddef>

namespace memtune::tensors {
namespace {

// value x num / den, rounded to nearest (den > 0): the quotient and the remainder apart, so
// that no product outgrows 64 bits (|num| and den are row counts, far below 2^31).
std::int64_t MulDiv(std::int64_t value, std::int64_t num, std::int64_t den) {
  const std::int64_t q = value / den, r = value % den;
  const std::int64_t part = r * num;
  const std::int64_t rounded = part >= 0 ? (part + den / 2) / den : -((-part + den / 2) / den);
  return q * num + rounded;
}

template <std::size_t N>
void Affine(std::array<std::int64_t, N>& out, const std::array<std::int64_t, N>& base,
            const std::array<std::int64_t, N>& per_rows, std::int64_t extra, std::int64_t den) {
  for (std::size_t i = 0; i < N; ++i) out[i] = base[i] + MulDiv(per_rows[i], extra, den);
}

}  // namespace

MoeLayerSizes MakeMoeLayerSizes(const ActContext& ctx, bool fp8_layer) {
  MoeLayerSizes out;
  out.base = MakeLayerSizes(ctx, true, fp8_layer);
  ActContext twice = ctx;
  twice.rows_mult = 2 * ctx.rows_mult;
  const LayerSizes doubled = MakeLayerSizes(twice, true, fp8_layer);
  auto diff = [](auto& d, const auto& hi, const auto& lo) {
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = hi[i] - lo[i];
  };
  LayerSizes& p = out.per_rows;
  diff(p.kept, doubled.kept, out.base.kept);
  diff(p.dropped, doubled.dropped, out.base.dropped);
  diff(p.fwd, doubled.fwd, out.base.fwd);
  diff(p.bwd, doubled.bwd, out.base.bwd);
  diff(p.attn_bwd, doubled.attn_bwd, out.base.attn_bwd);
  diff(p.offloaded, doubled.offloaded, out.base.offloaded);
  out.balanced_rows = BalancedExpertRows(ctx);
  auto whole = [&](const auto& a) {
    for (std::int64_t v : a) {
      if (out.balanced_rows <= 0 || v % out.balanced_rows != 0) return false;
    }
    return true;
  };
  out.whole_rows = whole(p.kept) && whole(p.dropped) && whole(p.fwd) && whole(p.bwd) &&
                   whole(p.attn_bwd) && whole(p.offloaded);
  return out;
}

LayerSizes MoeLayerSizes::At(std::int64_t rows) const {
  if (rows == balanced_rows || balanced_rows <= 0) return base;
  LayerSizes z = base;
  const std::int64_t extra = rows - balanced_rows;
  Affine(z.kept, base.kept, per_rows.kept, extra, balanced_rows);
  Affine(z.dropped, base.dropped, per_rows.dropped, extra, balanced_rows);
  Affine(z.fwd, base.fwd, per_rows.fwd, extra, balanced_rows);
  Affine(z.bwd, base.bwd, per_rows.bwd, extra, balanced_rows);
  Affine(z.attn_bwd, base.attn_bwd, per_rows.attn_bwd, extra, balanced_rows);
  Affine(z.offloaded, base.offloaded, per_rows.offloaded, extra, balanced_rows);
  return z;
}

}  // namespace memtune::tensors
