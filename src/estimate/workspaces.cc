// Library GEMM workspaces (docs/estimator.md "Library workspaces"). Sources:
// TransformerEngine d0067d0 pytorch/cpp_extensions/gemm.py (get_cublas_workspace_size_bytes,
// get_cublas_workspace, _NUM_MAX_UB_STREAMS) and common/util/multi_stream.cpp
// (get_num_compute_streams); PyTorch aten/src/ATen/cuda/CublasHandlePool.cpp
// (parseChosenWorkspaceSize, getCUDABlasLtWorkspace, setCublasWorkspace).
#include "workspaces.h"

#include <algorithm>
#include <charconv>

#include "memtune/core/units.h"
#include "memtune/model/gpu_catalog.h"
#include "memtune/model/parameters.h"

namespace memtune::estimate::internal {
namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

// "9.0" -> 9; "gfx942" -> -1 (not CUDA); "" -> 9: no GPU given, Hopper assumed (said so in
// the estimate's assumptions).
int CudaMajor(std::string_view cc) {
  if (cc.empty()) return 9;
  int major = -1;
  const auto [end, ec] = std::from_chars(cc.data(), cc.data() + cc.size(), major);
  return ec == std::errc() && end != cc.data() ? major : -1;
}

// ":4096:8" -> 4096 KiB x 8; several pairs add up. nullopt when nothing parses (PyTorch
// then warns and uses the default).
std::optional<std::int64_t> ParseWorkspaceConfig(std::string_view config) {
  std::int64_t total = 0;
  bool any = false;
  std::size_t at = 0;
  while ((at = config.find(':', at)) != std::string_view::npos) {
    std::int64_t size = 0, count = 0;
    const char* p = config.data() + at + 1;
    const char* end = config.data() + config.size();
    auto [q, ec1] = std::from_chars(p, end, size);
    if (ec1 != std::errc() || q == p || q == end || *q != ':') { ++at; continue; }
    auto [r, ec2] = std::from_chars(q + 1, end, count);
    if (ec2 != std::errc() || r == q + 1) { ++at; continue; }
    // (A workspace beyond a device's memory is no workspace: such a pair is skipped, and the
    // sum stays within kMaxDeviceBytes, so nothing overflows.)
    if (size > 0 && count > 0 && size <= kMaxDeviceBytes / 1024 / count &&
        total <= kMaxDeviceBytes - size * 1024 * count) {
      total += size * 1024 * count;
      any = true;
    }
    at = static_cast<std::size_t>(r - config.data());
  }
  return any ? std::optional<std::int64_t>(total) : std::nullopt;
}

}  // namespace

std::int64_t TeGemmWorkspaceBytes(std::string_view compute_capability) {
  return CudaMajor(compute_capability) >= 9 ? 32 * kMiB + 1024 : 4 * kMiB;
}

std::int64_t TorchCublasWorkspaceBytes(std::string_view compute_capability,
                                       const std::map<std::string, std::string>& env) {
  for (const auto& [name, value] : env) {  // (a few entries; find() would build a key string)
    if (name != "CUBLAS_WORKSPACE_CONFIG") continue;
    if (auto parsed = ParseWorkspaceConfig(value)) return *parsed;
  }
  if (compute_capability.rfind("gfx", 0) == 0) {
    const bool big = compute_capability.rfind("gfx94", 0) == 0 || compute_capability.rfind("gfx95", 0) == 0;
    return big ? 128 * kMiB : 32 * kMiB;
  }
  const int major = CudaMajor(compute_capability);
  return major == 9 || major == 10 || major == 12 ? 32 * kMiB : 4096 * 1024 * 2 + 16 * 1024 * 8;
}

std::string_view JobComputeCapability(const model::Job& job) {
  if (job.memtune.gpu.empty()) return {};
  auto found = model::FindGpuEntry(job.memtune.gpu);
  return found ? std::string_view((*found)->compute_capability) : std::string_view();
}

WorkspaceRules MakeWorkspaceRules(const model::Job& job, const ActContext& act) {
  const auto& m = job.model;
  const std::string_view cc = JobComputeCapability(job);
  WorkspaceRules r;
  r.te_bytes = TeGemmWorkspaceBytes(cc);
  r.torch_bytes = TorchCublasWorkspaceBytes(cc, job.memtune.env);
  const bool local_spec = m.transformer_impl == "local";
  r.te_layers = !local_spec;
  r.torch_layers = local_spec || act.unfused_attn;  // unfused: CoreAttentionOf(m) != kFused
  r.userbuffers = m.tp_comm_overlap;
  r.grouped_experts = m.num_moe_experts.has_value() && m.moe_grouped_gemm;
  r.attn_scores_bytes = LocalAttentionScoreBuffer(act);
  return r;
}

RankWorkspaces ComputeRankWorkspaces(const WorkspaceRules& rules, std::span<const ModelChunk> chunks,
                                     const std::vector<bool>& moe_pattern) {
  bool layers = false, moe = false, output = false;
  for (const ModelChunk& c : chunks) {
    layers = layers || c.num_layers + c.num_mtp_layers > 0;
    output = output || c.has_output;
    const int end = std::min(c.first_layer + c.num_layers, static_cast<int>(moe_pattern.size()));
    for (int i = c.first_layer; i < end && !moe; ++i) moe = moe_pattern[i];
    if (c.num_mtp_layers > 0 && !moe_pattern.empty()) moe = true;  // MTP blocks are MoE too
  }
  RankWorkspaces w;
  if (layers && rules.te_layers) {
    int count = 1;
    if (rules.userbuffers) count += 3;
    if (moe && rules.grouped_experts) count += 4;
    w.te = count * rules.te_bytes;
  }
  if (output || moe || (layers && rules.torch_layers)) w.torch = 2 * rules.torch_bytes;
  if (layers) w.attn_scores = rules.attn_scores_bytes;
  return w;
}

}  // namespace memtune::estimate::internal
