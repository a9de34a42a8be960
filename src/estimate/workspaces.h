// Library GEMM workspaces, and MCore local attention's score buffer, that a training rank
// keeps allocated through PyTorch's caching allocator from their first use on (so they count
// in max_allocated), sized from the GPU, the launch environment and the job (private to the
// estimator; docs/estimator.md "Library workspaces").
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/estimate/schedule.h"
#include "memtune/model/job.h"
#include "activations.h"

namespace memtune::estimate::internal {

// TE cpp_extensions/gemm.py get_cublas_workspace_size_bytes: 32 MiB + 1 KiB from compute
// capability 9 (Hopper) on, 4 MiB before; `compute_capability` as in the GPU catalog.
std::int64_t TeGemmWorkspaceBytes(std::string_view compute_capability);

// PyTorch aten/src/ATen/cuda/CublasHandlePool.cpp getChosenWorkspaceSize: the sum of
// SIZE KiB x COUNT over CUBLAS_WORKSPACE_CONFIG's ":SIZE:COUNT" pairs when the launch
// environment sets it, else 32 MiB on compute capability 9, 10 and 12, 128 MiB on gfx94x /
// gfx95x, 32 MiB on other AMD GPUs and 4096 KiB x 2 + 16 KiB x 8 on the rest. cuBLASLt
// shares this workspace (unified, the default since PyTorch 2.7).
std::int64_t TorchCublasWorkspaceBytes(std::string_view compute_capability,
                                       const std::map<std::string, std::string>& env);

// The GPU's compute capability from the job's memtune.gpu ("" when none or unknown); a
// view of the static GPU catalog.
std::string_view JobComputeCapability(const model::Job& job);

struct RankWorkspaces {
  std::int64_t te = 0;     // Transformer Engine GEMM workspaces
  std::int64_t torch = 0;  // PyTorch cuBLAS workspaces (one per thread that runs GEMMs)
  std::int64_t attn_scores = 0;  // MCore local attention's global score buffer
};

// The job-level part of the rules below (ComputeRankWorkspaces), resolved once per job.
struct WorkspaceRules {
  std::int64_t te_bytes = 0, torch_bytes = 0;  // one workspace of each
  bool te_layers = true;         // layers on a Transformer Engine spec (not the local spec)
  bool torch_layers = false;     // every layer runs torch GEMMs (unfused attention, local spec)
  bool userbuffers = false;      // tp_comm_overlap
  bool grouped_experts = false;  // MoE with moe_grouped_gemm
  std::int64_t attn_scores_bytes = 0;  // LocalAttentionScoreBuffer (0 unless local attention)
};
// `act`: MakeActContext(job).
WorkspaceRules MakeWorkspaceRules(const model::Job& job, const ActContext& act);

// The workspaces of the pipeline rank built from `chunks`:
// - TE (any layer on a Transformer Engine layer spec): one general workspace; three more
//   for userbuffers GEMMs with tp_comm_overlap (gemm.py _NUM_MAX_UB_STREAMS); four more for
//   grouped expert GEMMs (moe_grouped_gemm; common/util/multi_stream.cpp: 4 streams).
// - PyTorch: one per (thread, stream), and a rank whose forward and backward both run torch
//   GEMMs uses two threads, the Python thread and the autograd engine's device thread: the
//   output layer (MCore ColumnParallelLinear), a MoE router, unfused attention's bmm, or
//   every linear of the local layer spec.
// - MCore local attention (DotProductAttention): the global memory buffer its scores GEMM
//   writes into, one per rank with layers (activations.h LocalAttentionScoreBuffer).
// `moe_pattern`: model::MoeLayerPattern (true = MoE layer), empty for dense models.
RankWorkspaces ComputeRankWorkspaces(const WorkspaceRules& rules, std::span<const ModelChunk> chunks,
                                     const std::vector<bool>& moe_pattern);

}  // namespace memtune::estimate::internal
