// Routing-dependent expert loads (moe_load.h).
#include "tensors/moe_load.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "tensors/layer_plan.h"

namespace memtune::tensors {
namespace {

// splitmix64's finalizer (Steele, Lea, Flood 2014): a bijective 64-bit mix.
std::uint64_t Mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A uniform in (0, 1] from the top 53 bits.
double Unit(std::uint64_t bits) { return (static_cast<double>(bits >> 11) + 1.0) * 0x1p-53; }

// A standard normal for (layer, micro-batch): Box-Muller on two hashed uniforms.
double DrawNormal(int layer, std::int64_t mb) {
  const std::uint64_t h =
      Mix(Mix(static_cast<std::uint64_t>(layer)) ^ static_cast<std::uint64_t>(mb));
  const double u1 = Unit(Mix(h)), u2 = Unit(Mix(h ^ 0x5bd1e995ULL));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// DrawNormal memoized per thread for the first layers and micro-batches (a planner estimates
// thousands of layouts of one model): at most kCachedLayers x kCachedMicrobatches doubles.
constexpr int kCachedLayers = 512;
constexpr std::int64_t kCachedMicrobatches = 1024;

double Normal(int layer, std::int64_t mb) {
  if (layer < 0 || layer >= kCachedLayers || mb < 0 || mb >= kCachedMicrobatches)
    return DrawNormal(layer, mb);
  thread_local std::vector<std::vector<double>> cache;
  if (cache.size() <= static_cast<std::size_t>(layer)) cache.resize(layer + 1);
  std::vector<double>& row = cache[layer];
  while (static_cast<std::int64_t>(row.size()) <= mb) {
    row.push_back(DrawNormal(layer, static_cast<std::int64_t>(row.size())));
  }
  return row[mb];
}

}  // namespace

double RoutingSpread(const model::Job& job) {
  if (job.model.num_moe_experts.value_or(0) <= 0) return 0;
  if (job.memtune.moe_routing_spread) return *job.memtune.moe_routing_spread;
  return job.model.moe_router_force_load_balancing ? 0 : kDefaultRoutingSpread;
}

MoeLoadModel MakeMoeLoadModel(const model::Job& job) {
  const auto& m = job.model;
  MoeLoadModel out;
  const double spread = RoutingSpread(job);
  const std::int64_t experts = m.num_moe_experts.value_or(0);
  const int ep = std::max(1, m.expert_model_parallel_size);
  if (spread <= 0 || experts <= 0 || ep <= 1 || experts % ep != 0) return out;
  if (job.memtune.framework == model::Framework::kFsdp2) return out;
  const KeepRules keep = MakeKeepRules(m);
  if (keep.full || keep.offloaded > 0 || m.fine_grained_activation_offloading) return out;
  const double share_var = std::expm1(spread * spread);
  const double rank_var =
      std::log1p(share_var * (static_cast<double>(ep) - 1.0) / static_cast<double>(experts));
  out.rank_sigma = std::sqrt(rank_var);
  out.capacity = m.moe_expert_capacity_factor.value_or(0);
  const std::int64_t local = experts / ep, topk = std::max<std::int64_t>(1, m.moe_router_topk);
  out.max_load =
      static_cast<double>(std::min(topk, local) * experts) / static_cast<double>(topk * local);
  return out;
}

std::int64_t ExpertRows(const MoeLoadModel& model, std::int64_t balanced_rows, int layer,
                        std::int64_t mb) {
  if (!model.active()) return balanced_rows;
  const double s = model.rank_sigma;
  double load = std::exp(s * Normal(layer, mb) - 0.5 * s * s);
  if (model.capacity > 0) load = std::min(load, model.capacity);
  if (model.max_load > 0) load = std::min(load, model.max_load);
  return std::llround(static_cast<double>(balanced_rows) * load);
}

std::int64_t BalancedExpertRows(const ActContext& c) {
  return c.tokens / c.hid_div * c.topk * c.etp;
}

}  // namespace memtune::tensors
