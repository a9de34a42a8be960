// Library GEMM workspaces, and MCore local attention's score buffer, that a training rank
// keeps allocated through PyTorch's caching allocator from their first use on (so they count
// in max_allocated), sized from the GPU, the launch environment and the job (memtune_tensors
// internal API; docs/estimator.md "Library workspaces").
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/estimate/schedule.h"
#include "memtune/model/job.h"
#include "tensors/activations.h"
#include "tensors/model_state.h"
#include "tensors/wgrad_shapes.h"

namespace memtune::tensors {

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

// TE utils.py is_non_tn_fp8_gemm_supported() is false, so TE keeps a transposed copy of each
// fp8 weight: every compute capability but 10.x, 11.x and >= 13 (sm_120 still needs the TN
// layout); AMD targets and "" (no GPU given: Hopper assumed) keep it too.
bool Fp8GemmNeedsTranspose(std::string_view compute_capability);

// The GPU's compute capability from the job's memtune.gpu ("" when none or unknown); a
// view of the static GPU catalog.
std::string_view JobComputeCapability(const model::Job& job);

// Whether Transformer Engine keeps fp8 transposed weights on the job's GPU:
// Fp8GemmNeedsTranspose(JobComputeCapability(job)), as the estimator and the trace
// synthesizer size the model state (MakeModelStateRules, ComputeModelState).
bool KeepsFp8Transpose(const model::Job& job);

// The parts of a rank that bring placeholder shapes, as bits of a source mask.
enum WgradSource : int { kWgradDense = 1, kWgradMoe = 2, kWgradOutput = 4, kWgradMtp = 8 };
inline constexpr int kWgradSourceMasks = 16;

struct RankWorkspaces {
  std::int64_t te = 0;           // Transformer Engine GEMM workspaces
  std::int64_t torch = 0;        // PyTorch cuBLAS workspaces (one per thread that runs GEMMs)
  std::int64_t attn_scores = 0;  // MCore local attention's global score buffer
  // The same global buffer ("mpu", one per dtype, grown to the largest request) as the
  // output layer's sequence-parallel all-gather target (last stage) and the allgather MoE
  // dispatcher's token all-gather (ranks with MoE layers): the bytes they add beyond
  // attn_scores.
  std::int64_t output_gather = 0;
  std::int64_t dummy_wgrad = 0;  // TE's cached weight-gradient placeholders (above), bytes
  int wgrad_sources = 0;         // WgradSource bits of the parts the rank builds
};

// The job-level part of the rules below (ComputeRankWorkspaces), resolved once per job.
struct WorkspaceRules {
  std::int64_t te_bytes = 0, torch_bytes = 0;  // one workspace of each
  bool te_layers = true;         // layers on a Transformer Engine spec (not the local spec)
  bool torch_layers = false;     // every layer runs torch GEMMs (unfused attention, local spec)
  bool userbuffers = false;      // tp_comm_overlap
  bool grouped_experts = false;  // MoE with moe_grouped_gemm
  std::int64_t attn_scores_bytes = 0;    // LocalAttentionScoreBuffer (0 unless local attention)
  std::int64_t output_gather_bytes = 0;  // the output layer's SP all-gather (0 without SP)
  std::int64_t moe_gather_bytes = 0;     // the allgather dispatcher's gathered tokens (or 0)
  // Placeholder shapes of each part a rank can build (empty with PEFT: frozen weights get no
  // weight gradient; the adapters' few small shapes are left out).
  WgradShapes wgrad_dense, wgrad_moe;  // one dense / MoE transformer layer's linears
  WgradShapes wgrad_output;            // the output layer (input dtype), when trainable
  WgradShapes wgrad_mtp;               // an MTP block's eh_proj
  // Bytes of the union of the shapes of each WgradSource mask (masks whose sources the job
  // has; the others stay 0), so that a rank reads its total without merging shapes.
  std::array<std::int64_t, kWgradSourceMasks> wgrad_bytes{};
};

// The distinct placeholder shapes of a rank with the given WgradSource mask.
WgradShapes DummyWgradShapes(const WorkspaceRules& rules, int sources);
// DummyWgradShapes(rules, mask).Bytes() for every mask (a source without shapes adds none;
// 0 when none of the mask's sources has shapes).
std::array<std::int64_t, kWgradSourceMasks> WgradBytesByMask(const WorkspaceRules& rules);
// `act`: MakeActContext(job); `catalog`: MakeParamCatalog(job), whose pass over the layer
// tensors collected their placeholder shapes.
WorkspaceRules MakeWorkspaceRules(const model::Job& job, const ActContext& act,
                                  const ParamCatalog& catalog);

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
// - The output layer with sequence parallelism: MCore tensor_parallel/layers.py gathers its
//   input into the global memory buffer (get_global_memory_buffer().get_tensor(..., "mpu")),
//   which stays; on a rank with local attention the two share one buffer.
// - Weight-gradient placeholders: the union of the shapes of the parts the rank builds
//   (dense layers, MoE layers, output layer, MTP blocks).
// `moe_pattern`: model::MoeLayerPattern (true = MoE layer), empty for dense models.
RankWorkspaces ComputeRankWorkspaces(const WorkspaceRules& rules,
                                     std::span<const estimate::ModelChunk> chunks,
                                     const std::vector<bool>& moe_pattern);

}  // namespace memtune::tensors
