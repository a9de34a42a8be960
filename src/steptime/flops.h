// Model FLOPs of one global batch, as Megatron-LM counts them
// (megatron/training/training.py num_floating_point_operations, d98e8a6): every GEMM three
// times (forward, data gradient, weight gradient) at 2 FLOPs per multiply-add, attention
// scores and attention x V, the output layer; recompute never counted.
#pragma once

#include "memtune/model/job.h"

namespace memtune::steptime {

struct ModelFlops {
  double causal = 0;     // attention term halved (Megatron-LM since 8873b55d6a, Bridge)
  double noncausal = 0;  // full attention term (older Megatron-LM, NeMo 24.x, torchtitan)
};

ModelFlops GlobalBatchFlops(const model::Job& job);

}  // namespace memtune::steptime
