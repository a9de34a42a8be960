// The memory outside PyTorch on one rank: the driver's reserve, the CUDA context, NCCL per
// communicator and Transformer Engine's userbuffers (docs/non-pytorch.md).
#include "memtune/nonpytorch/non_pytorch.h"

#include <algorithm>

#include "memtune/core/units.h"
#include "nonpytorch/internal.h"

namespace memtune::nonpytorch {
namespace {

// The context of a process that runs Transformer Engine: the catalog's base context plus TE,
// cuDNN fused-attention, cuBLASLt and NCCL kernel images, so that an H100 process lands on
// the 0.55-0.95 GiB (central 0.70 GiB) published for Megatron + TE FP8 processes.
constexpr std::int64_t kTeModulesBytes = 192 * kMiB;
constexpr std::int64_t kTeModulesLowBytes = 51 * kMiB;
constexpr std::int64_t kTeModulesHighBytes = 461 * kMiB;
// Without TE: 300 MiB (lazy context after the first op, pytorch/pytorch#107667) to the
// 0.74 GiB measured on a 2-GPU H100 job (an OOM message's non-PyTorch share).
constexpr std::int64_t kPlainContextLowBytes = 300 * kMiB;
constexpr std::int64_t kPlainContextHighBytes = 758 * kMiB;
// CUDA_MODULE_LOADING=EAGER loads every kernel at start: 667 MB vs 287 MB lazy after one
// op (pytorch/pytorch PR #86509); a TE process loads many more kernels, hence the high end.
constexpr std::int64_t kEagerModulesBytes = 380 * kGB / 1000;
constexpr std::int64_t kEagerModulesHighBytes = 2 * kGiB;
// TE userbuffers' control region, flags and counters (userbuffers-host.cpp).
constexpr std::int64_t kUbExtrasBytes = 5 * kMiB;

bool UsesTe(const model::Job& job) {
  return job.memtune.framework == model::Framework::kMegatron &&
         job.model.transformer_impl == model::TransformerImpl::kTransformerEngine;
}

Part ContextPart(const model::Job& job, const model::GpuSpec* gpu) {
  const std::int64_t base = gpu != nullptr ? gpu->cuda_context_bytes : 512 * kMiB;
  Part p{"cuda_context", "cuda_context", base, base, base, Moment::kStartup, "", true};
  if (UsesTe(job)) {
    p.bytes += kTeModulesBytes;
    p.low_bytes += kTeModulesLowBytes;
    p.high_bytes += kTeModulesHighBytes;
    p.detail = "context and lazily loaded kernels (PyTorch, cuBLAS, TE, cuDNN, NCCL)";
  } else {
    p.low_bytes = std::min(base, kPlainContextLowBytes);
    p.high_bytes = std::max(base, kPlainContextHighBytes);
    p.detail = "context and lazily loaded kernels (PyTorch, cuBLAS, NCCL)";
  }
  const auto loading = job.memtune.env.find("CUDA_MODULE_LOADING");
  if (loading != job.memtune.env.end() && loading->second == "EAGER") {
    p.bytes += kEagerModulesBytes;
    p.low_bytes += kEagerModulesBytes;
    p.high_bytes += kEagerModulesHighBytes;
    p.detail += "; CUDA_MODULE_LOADING=EAGER loads every module at start";
  }
  return p;
}

// TE initialize_ub (module/base.py, comm_gemm_overlap.cpp), as Megatron-LM's and Bridge's
// initialize_tp_communicators call it: 12 buffers of [seq * mbs / cp, hidden] per
// quantization mode; the 8 all-gather-side ones are uint8 in FP8 mode, the 4
// reduce-scatter-side ones bf16. A second (bf16) mode joins with FP8 when
// first_last_layers_bf16 keeps layers in bf16. cuMemCreate'd: outside PyTorch.
Part UserbuffersPart(const model::Job& job) {
  const auto& m = job.model;
  const std::int64_t cp = std::max(1, m.context_parallel_size);
  const std::int64_t tokens = m.seq_length * job.train.micro_batch_size / cp;
  const std::int64_t elements = tokens * m.hidden_size;
  const bool fp8 = m.fp8 != model::Fp8Format::kNone;
  std::int64_t bytes = elements * (8 * (fp8 ? 1 : 2) + 8);
  std::string detail = std::string("12 buffers of ") + std::to_string(tokens) + " x " +
                       std::to_string(m.hidden_size) + (fp8 ? " (fp8 all-gather side)" : "");
  if (fp8 && m.first_last_layers_bf16 &&
      (m.num_layers_at_start_in_bf16 > 0 || m.num_layers_at_end_in_bf16 > 0)) {
    bytes += elements * (8 * 2 + 8);
    detail += ", and a bf16 set for the bf16 first/last layers";
  }
  bytes += kUbExtrasBytes;
  return {"te_userbuffers", "te_userbuffers", bytes, bytes, bytes, Moment::kStartup, detail, true};
}

}  // namespace

const char* MomentName(Moment moment) {
  switch (moment) {
    case Moment::kStartup:
      return "startup";
    case Moment::kFirstForward:
      return "first forward";
    case Moment::kFirstGradSync:
      return "first gradient sync";
    case Moment::kFirstOptimizerStep:
      return "first optimizer step";
  }
  return "startup";
}

std::int64_t NonPytorchMemory::TotalBytes() const {
  std::int64_t sum = 0;
  for (const Part& p : parts) sum += p.bytes;
  return sum;
}
std::int64_t NonPytorchMemory::LowBytes() const {
  std::int64_t sum = 0;
  for (const Part& p : parts) sum += p.low_bytes;
  return sum;
}
std::int64_t NonPytorchMemory::HighBytes() const {
  std::int64_t sum = 0;
  for (const Part& p : parts) sum += p.high_bytes;
  return sum;
}
std::int64_t NonPytorchMemory::KeyBytes(const std::string& key) const {
  std::int64_t sum = 0;
  for (const Part& p : parts) {
    if (p.key == key) sum += p.bytes;
  }
  return sum;
}
std::int64_t NonPytorchMemory::OutsideProcessBytes() const {
  std::int64_t sum = 0;
  for (const Part& p : parts) {
    if (!p.in_process) sum += p.bytes;
  }
  return sum;
}
std::vector<std::string> NonPytorchMemory::Keys() const {
  std::vector<std::string> keys;
  for (const Part& p : parts) {
    if (std::find(keys.begin(), keys.end(), p.key) == keys.end()) keys.push_back(p.key);
  }
  return keys;
}

Result<NonPytorchMemory> EstimateNonPytorch(const model::Job& job, const model::GpuSpec* gpu,
                                            int pp_rank) {
  MEMTUNE_TRY(const NcclSettings settings, ReadNcclSettings(job));
  NonPytorchMemory out;
  if (gpu != nullptr && gpu->driver_reserved_bytes > 0) {
    // The capacity is nvidia-smi's total, which includes the framebuffer the driver keeps
    // for itself (`nvidia-smi -q` FB "Reserved"); CUDA never sees it.
    out.parts.push_back({"driver_reserved", "driver_reserved", gpu->driver_reserved_bytes,
                         gpu->driver_reserved_low_bytes, gpu->driver_reserved_high_bytes,
                         Moment::kStartup,
                         "framebuffer the driver reserves (nvidia-smi total - CUDA total)", false});
  }
  out.parts.push_back(ContextPart(job, gpu));
  if (job.model.tp_comm_overlap && job.model.tensor_model_parallel_size > 1 && UsesTe(job)) {
    out.parts.push_back(UserbuffersPart(job));
  }
  const Fabric fabric = FabricOf(gpu);
  const int gpus_per_node = job.memtune.gpus_per_node;
  for (const Comm& c : RankComms(job, pp_rank, gpus_per_node)) {
    const CommBytes b = NcclCommBytes(c, settings, fabric);
    out.parts.push_back({"nccl", "nccl." + c.name, b.central, b.low, b.high, c.moment,
                         b.detail + "; " + c.why, true});
  }
  std::stable_sort(out.parts.begin(), out.parts.end(), [](const Part& a, const Part& b) {
    return static_cast<int>(a.moment) < static_cast<int>(b.moment);
  });
  return out;
}

}  // namespace memtune::nonpytorch
