// Library GEMM workspaces (docs/estimator.md "Library workspaces"). Sources:
// TransformerEngine d0067d0 pytorch/cpp_extensions/gemm.py (get_cublas_workspace_size_bytes,
// get_cublas_workspace, _NUM_MAX_UB_STREAMS) and common/util/multi_stream.cpp
// (get_num_compute_streams); PyTorch aten/src/ATen/cuda/CublasHandlePool.cpp
// (parseChosenWorkspaceSize, getCUDABlasLtWorkspace, setCublasWorkspace).
#include "tensors/workspaces.h"

#include <algorithm>
#include <charconv>

#include "memtune/core/units.h"
#include "memtune/model/gpu_catalog.h"
#include "memtune/model/parameters.h"
#include "memtune/model/versions.h"

namespace memtune::tensors {
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
    if (ec1 != std::errc() || q == p || q == end || *q != ':') {
      ++at;
      continue;
    }
    auto [r, ec2] = std::from_chars(q + 1, end, count);
    if (ec2 != std::errc() || r == q + 1) {
      ++at;
      continue;
    }
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

bool Fp8GemmNeedsTranspose(std::string_view compute_capability) {
  const int major = CudaMajor(compute_capability);
  return !((major >= 10 && major < 12) || major >= 13);
}

std::int64_t TorchCublasWorkspaceBytes(std::string_view compute_capability,
                                       const std::map<std::string, std::string>& env) {
  for (const auto& [name, value] : env) {  // (a few entries; find() would build a key string)
    if (name != "CUBLAS_WORKSPACE_CONFIG") continue;
    if (auto parsed = ParseWorkspaceConfig(value)) return *parsed;
  }
  if (compute_capability.rfind("gfx", 0) == 0) {
    const bool big =
        compute_capability.rfind("gfx94", 0) == 0 || compute_capability.rfind("gfx95", 0) == 0;
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

bool KeepsFp8Transpose(const model::Job& job) {
  return Fp8GemmNeedsTranspose(JobComputeCapability(job));
}

WorkspaceRules MakeWorkspaceRules(const model::Job& job, const ActContext& act,
                                  const ParamCatalog& catalog) {
  const auto& m = job.model;
  const std::string_view cc = JobComputeCapability(job);
  WorkspaceRules r;
  r.te_bytes = TeGemmWorkspaceBytes(cc);
  r.torch_bytes = TorchCublasWorkspaceBytes(cc, job.memtune.env);
  const bool local_spec = m.transformer_impl == model::TransformerImpl::kLocal;
  r.te_layers = !local_spec;
  r.torch_layers = local_spec || act.unfused_attn;  // unfused: CoreAttentionOf(m) != kFused
  r.userbuffers = m.tp_comm_overlap;
  r.grouped_experts = m.num_moe_experts.has_value() && m.moe_grouped_gemm;
  r.attn_scores_bytes = LocalAttentionScoreBuffer(act);
  // tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication.forward: with
  // sequence_parallel the output layer all-gathers its input ([s, b, h] of the micro-batch)
  // into get_global_memory_buffer().get_tensor(..., "mpu"), kept for the run.
  if (act.hid_div > 1) r.output_gather_bytes = std::int64_t{act.act_bytes} * act.h * act.tokens;
  // token_dispatcher.py MoEAllGatherTokenDispatcher.token_dispatch (Megatron-LM d98e8a64):
  // with expert TP or EP the local tokens are all-gathered over the expert-TP x EP group
  // with use_global_buffer=True, into the same "mpu" buffer.
  const int ep = std::max(1, m.expert_model_parallel_size);
  if (m.moe_token_dispatcher_type == model::MoeTokenDispatcher::kAllgather && act.experts > 0 &&
      act.etp * ep > 1) {
    const std::int64_t width = m.moe_latent_size.value_or(act.h);
    r.moe_gather_bytes =
        std::int64_t{act.act_bytes} * width * (act.tokens / act.hid_div) * act.etp * ep;
  }
  // Placeholders need gradient_accumulation_fusion and a weight gradient: none for PEFT's
  // frozen base and output layer. Older releases return a new tensor per backward instead
  // (model/versions.h; activations.cc and job_facts.cc count that one).
  if (!job.peft && m.gradient_accumulation_fusion) {
    if (model::TeCachesDummyWgrad(job)) {
      r.wgrad_dense = catalog.wgrad_layer[0];
      r.wgrad_moe = catalog.wgrad_layer[1];
      r.wgrad_mtp = catalog.wgrad_mtp;
    }
    // MCore layers.py: get_dummy_wgrad(main_grad.shape, input.dtype). The weight is
    // [vocab / TP, hidden] whether it is the output layer's own or the tied embedding.
    const int tp = std::max(1, m.tensor_model_parallel_size);
    if (model::McoreCachesOutputWgrad(job))
      r.wgrad_output.Add({model::PaddedVocabSize(job) / tp, m.hidden_size, act.act_bytes});
    r.wgrad_bytes = WgradBytesByMask(r);
  }
  return r;
}

std::array<std::int64_t, kWgradSourceMasks> WgradBytesByMask(const WorkspaceRules& rules) {
  const int available = (rules.wgrad_dense.count > 0 ? kWgradDense : 0) |
                        (rules.wgrad_moe.count > 0 ? kWgradMoe : 0) |
                        (rules.wgrad_output.count > 0 ? kWgradOutput : 0) |
                        (rules.wgrad_mtp.count > 0 ? kWgradMtp : 0);
  std::array<std::int64_t, kWgradSourceMasks> bytes{};
  // A source without shapes (PEFT, or a release without the cache for it) adds none.
  for (int mask = 1; mask < kWgradSourceMasks; ++mask) {
    if ((mask & available) != 0) bytes[mask] = DummyWgradShapes(rules, mask).Bytes();
  }
  return bytes;
}

WgradShapes DummyWgradShapes(const WorkspaceRules& rules, int sources) {
  WgradShapes shapes;
  if (sources & kWgradDense) shapes.AddAll(rules.wgrad_dense);
  if (sources & kWgradMoe) shapes.AddAll(rules.wgrad_moe);
  if (sources & kWgradMtp) shapes.AddAll(rules.wgrad_mtp);
  if (sources & kWgradOutput) shapes.AddAll(rules.wgrad_output);
  return shapes;
}

RankWorkspaces ComputeRankWorkspaces(const WorkspaceRules& rules,
                                     std::span<const estimate::ModelChunk> chunks,
                                     const std::vector<bool>& moe_pattern) {
  bool layers = false, moe = false, dense = false, output = false, mtp = false;
  for (const estimate::ModelChunk& c : chunks) {
    layers = layers || c.num_layers + c.num_mtp_layers > 0;
    output = output || c.has_output;
    mtp = mtp || c.num_mtp_layers > 0;
    const int patterned =
        std::min(c.num_layers, std::max(0, static_cast<int>(moe_pattern.size()) - c.first_layer));
    dense = dense || patterned < c.num_layers;  // past the pattern's end: dense
    for (int i = c.first_layer; i < c.first_layer + patterned && !(moe && dense); ++i) {
      (moe_pattern[i] ? moe : dense) = true;
    }
    if (c.num_mtp_layers > 0 && !moe_pattern.empty()) moe = true;  // MTP blocks are MoE too
    if (c.num_mtp_layers > 0 && moe_pattern.empty()) dense = true;
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
  const std::int64_t gathers =
      std::max(output ? rules.output_gather_bytes : 0, moe ? rules.moe_gather_bytes : 0);
  w.output_gather = std::max<std::int64_t>(0, gathers - w.attn_scores);
  w.wgrad_sources = (dense ? kWgradDense : 0) | (moe ? kWgradMoe : 0) |
                    (output ? kWgradOutput : 0) | (mtp ? kWgradMtp : 0);
  w.dummy_wgrad = rules.wgrad_bytes[w.wgrad_sources];
  return w;
}

}  // namespace memtune::tensors
