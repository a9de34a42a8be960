// The GPU and server numbers the step-time model uses, in SI units, and the efficiency
// constants of docs/step-time.md ("Hardware constants"), each with its source there.
#pragma once

#include "memtune/core/result.h"
#include "memtune/model/gpu_catalog.h"
#include "memtune/model/job.h"

namespace memtune::steptime {

// Precision a GEMM runs in.
enum class GemmDtype { kBf16, kFp8, kFp4, kFp32 };

struct Hardware {
  double bf16_flops = 0;  // dense Tensor-Core peaks, FLOP/s
  double fp8_flops = 0;   // 0 = no FP8 Tensor Cores (FP8 GEMMs then run at BF16)
  double fp4_flops = 0;
  double hbm_bytes_per_s = 0;
  double nvlink_bytes_per_s = 0;   // per GPU and direction; PCIe when the GPU has no NVLink
  double network_bytes_per_s = 0;  // per GPU and direction, between NVLink domains
  double host_link_bytes_per_s = 0;
  double host_memory_bytes_per_s = 0;
  int sm_count = 1;
  int nvlink_domain_gpus = 8;
  int gpus_per_node = 8;

  double PeakFlops(GemmDtype dtype) const;
  // The same GPU with `sms` SMs taken by communication kernels (TE userbuffers
  // set_sm_margin): fewer SMs and proportionally lower peaks.
  Hardware WithoutSms(int sms) const;
};

// Achieved fractions of the peaks (docs/step-time.md cites each).
inline constexpr double kGemmEfficiencyBf16 = 0.80;  // large cuBLAS BF16 GEMMs
inline constexpr double kGemmEfficiencyFp8 = 0.70;   // large cuBLASLt FP8 GEMMs
inline constexpr double kGemmPipelineFillK = 256;    // BF16 K elements of the mainloop fill
inline constexpr double kGemmTileM = 128;            // output tile of a Hopper/Ampere GEMM
inline constexpr double kGemmTileN = 128;
inline constexpr double kAttentionFwdEfficiency = 0.60;  // flash attention forward, BF16
inline constexpr double kAttentionBwdEfficiency = 0.45;  // flash attention backward
inline constexpr double kHbmEfficiency = 0.80;           // element-wise kernels
inline constexpr double kNvlinkEfficiency = 0.80;        // NCCL ring bus bandwidth on NVLink
inline constexpr double kNetworkEfficiency = 0.90;       // NCCL on InfiniBand / RoCE
inline constexpr double kHostLinkEfficiency = 0.80;      // pinned PCIe copies
inline constexpr double kKernelSeconds = 2e-6;           // launch-to-start gap per kernel
inline constexpr double kNvlinkLatencySeconds = 10e-6;   // one NCCL collective on NVLink
inline constexpr double kNetworkLatencySeconds = 25e-6;  // one NCCL collective across nodes
// TE userbuffers defaults (transformer_engine/pytorch/module/base.py initialize_ub,
// get_default_config): "pipeline" (proj/fc2 forward RS) and "bulk" (backward) overlaps run
// their comm kernels on 16 SMs reserved from the GEMM; "pipeline" splits the GEMM in 4.
inline constexpr int kUbCommSms = 16;
inline constexpr int kUbPipelineSplits = 4;
inline constexpr double kHostOpSeconds = 10e-6;       // CPU time of one eager op dispatch
inline constexpr double kGraphLaunchSeconds = 15e-6;  // CPU time of one CUDA-graph replay
// PyTorch's CPU Adam: 1.39 s per 1e9 parameters (ZeRO-Offload, Ren et al. 2021, Table 3).
inline constexpr double kCpuAdamSecondsPerParam = 1.39e-9;

// The hardware of `job` (memtune.gpu, memtune.gpus_per_node).
// Errors: kInvalidConfig (field memtune.gpu) when the job names no catalog GPU.
Result<Hardware> JobHardware(const model::Job& job);

}  // namespace memtune::steptime
