// The LoRA rank of a MoE layer's expert adapters (memtune_tensors internal API, used by the
// parameter count and the saved activations).
#pragma once

#include <algorithm>
#include <cstdint>

#include "memtune/model/job.h"

namespace memtune::tensors {

// Bridge 067f987d peft/utils.py get_effective_lora_dim: dim / moe_router_topk on expert
// linears with normalize_moe_lora, else dim; align_expert_dim_for_tp rounds the column-
// parallel linear_fc1's up to a multiple of `etp` (the row-parallel fc2 is input-parallel).
inline std::int64_t ExpertLoraRank(const model::PeftConfig& peft, std::int64_t topk,
                                   std::int64_t etp, bool fc1) {
  if (!peft.normalize_moe_lora) return peft.dim;
  const std::int64_t rank = peft.dim / std::max<std::int64_t>(1, topk);
  etp = std::max<std::int64_t>(1, etp);
  return fc1 && rank % etp != 0 ? (rank + etp - 1) / etp * etp : rank;
}

}  // namespace memtune::tensors
