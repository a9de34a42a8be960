// memtune.versions: the library releases a job runs with, and the behaviour changes that
// memory depends on. Each switch names the upstream commit and the first release holding
// it; an unset version means the newest release memtune follows (docs/versions.md).
#pragma once

#include <string>

#include "memtune/model/job.h"

namespace memtune::model {

// The releases an unset memtune.versions entry stands for (docs/versions.md).
inline constexpr const char* kDefaultMegatronCoreVersion = "0.20";       // Megatron-LM d98e8a64
inline constexpr const char* kDefaultTransformerEngineVersion = "2.20";  // TE d0067d0d
inline constexpr const char* kDefaultNcclVersion = "2.27.7";

// Whether `version` ("MAJOR.MINOR[.PATCH]", validated by the job parser) is older than
// MAJOR.MINOR; false when it is "" (the newest release).
// Example: VersionBefore("0.12.3", 0, 13) == true; VersionBefore("", 0, 13) == false.
bool VersionBefore(const std::string& version, int major, int minor);

// Megatron-Core >= 0.13 (NVIDIA/Megatron-LM 2659630721, "Memory efficient token
// permutation", 2025-04-09): the dispatchers hand the router probabilities to the experts,
// whose activation multiplies them in (experts.py bias_act_func / weighted_bias_swiglu_impl),
// and unpermute runs without probs, so no dispatcher keeps the expert outputs for the
// probability multiply's backward. Before it, every dispatcher's unpermute(probs=...) (or
// its all-gather twin) saved the [tokens x top-k, hidden] expert outputs (act.moe_combine).
bool McoreProbsInExperts(const Job& job);

// Transformer Engine >= 2.3 (NVIDIA/TransformerEngine ba5dc5dde, "Enable reuse of dummy
// wgrad tensor", 2025-04-08): with fuse_wgrad_accumulation a linear's backward returns a
// placeholder from module/base.py get_dummy_wgrad's cache, one per (shape, dtype), kept for
// the process's life. Before it, every such backward returned a new torch.empty of the
// weight's main_grad shape, which MCore's DDP hook dropped right after (param.grad = None).
bool TeCachesDummyWgrad(const Job& job);

// The output layer's placeholder (tensor_parallel/layers.py
// LinearWithGradAccumulationAndAsyncCommunication) comes from the same cache from
// Megatron-Core 0.14 (e7c55de99e, 2025-08-01) when TE >= 2.3 provides it; before, a new
// torch.empty of [vocab / TP, hidden] per backward, dropped by the DDP hook.
bool McoreCachesOutputWgrad(const Job& job);

}  // namespace memtune::model
