// The component list an FSDP2 moment is built from, shared by the estimate without and with
// pipeline parallelism (fsdp2_estimate.cc, fsdp2_pipeline.cc). Private to src/estimate.
#pragma once

#include <cstdint>
#include <vector>

#include "memtune/estimate/estimate.h"
#include "tensors/fsdp2_tensors.h"

namespace memtune::estimate::internal::fsdp2 {

using Parts = std::vector<Component>;

// Appends a component unless it is empty; `why` only with explanations.
inline void Add(Parts& parts, const char* name, std::int64_t bytes, ComponentKind kind,
                const char* why, bool explain) {
  if (bytes <= 0) return;
  parts.push_back(Component{name, bytes, kind, false, explain ? why : ""});
}

inline std::int64_t Total(const Parts& parts) {
  std::int64_t total = 0;
  for (const auto& c : parts) total += c.bytes;
  return total;
}

// Elements of a parameter group as the module holds them (TP-local, unpadded), and as
// FSDP2's all-gather and reduce-scatter see them (dim 0 padded to the shard degree).
inline std::int64_t Elements(const std::vector<tensors::Fsdp2Param>& params) {
  std::int64_t total = 0;
  for (const auto& p : params) total += p.Elements();
  return total;
}
inline std::int64_t PaddedElements(const std::vector<tensors::Fsdp2Param>& params, int shard) {
  std::int64_t total = 0;
  for (const auto& p : params) total += p.ShardElements(shard) * shard;
  return total;
}

// Fills a rank's allocated bytes and its sums by kind from its components.
inline void SumKinds(RankEstimate& rank) {
  rank.allocated_bytes = Total(rank.components);
  for (const auto& c : rank.components) {
    switch (c.kind) {
      case ComponentKind::kParameters:
      case ComponentKind::kGradients:
      case ComponentKind::kOptimizer:
        rank.model_state_bytes += c.bytes;
        break;
      case ComponentKind::kActivations:
      case ComponentKind::kLogits:
        rank.activation_bytes += c.bytes;
        break;
      case ComponentKind::kTransient:
        rank.transient_bytes += c.bytes;
        break;
    }
  }
  rank.dense_bytes = rank.model_state_bytes;
}

}  // namespace memtune::estimate::internal::fsdp2
