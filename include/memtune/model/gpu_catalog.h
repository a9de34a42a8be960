// The GPU catalog: memory capacity, speeds and interconnect of common training GPUs.
//
// The data lives in data/gpus.yaml (compiled into the binary); every number there carries
// its source, and docs/catalog.md lists them. memtune.gpu in a job document names an entry
// (or an alias); memtune.gpu_memory_bytes overrides the capacity.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/core/result.h"

namespace memtune::model {

// One GPU model.
struct GpuSpec {
  std::string name;                  // catalog name, e.g. "h100-sxm-80gb"
  std::vector<std::string> aliases;  // other accepted names, e.g. "NVIDIA H100 80GB HBM3"
  std::string description;           // e.g. "NVIDIA H100 SXM5 80GB HBM3"
  // What torch.cuda.get_device_properties().total_memory reports (driver-dependent);
  // total_memory_basis says how the value was obtained: "exact" (a tool printed the bytes),
  // "torch_mib" (PyTorch printed whole MiB) or "nvml_mib" (nvidia-smi memory.total).
  std::int64_t total_memory_bytes = 0;
  std::string total_memory_basis;
  // The CUDA context of a training process with lazily loaded PyTorch and cuBLAS kernels,
  // the base of memtune's context part (nonpytorch/non_pytorch.h).
  std::int64_t cuda_context_bytes = 0;
  // When total_memory_basis is "nvml_mib": the framebuffer the driver reserves, which
  // nvidia-smi's total includes and CUDA never sees (central, and the range of drivers).
  // 0 for the other bases.
  std::int64_t driver_reserved_bytes = 0;
  std::int64_t driver_reserved_low_bytes = 0;
  std::int64_t driver_reserved_high_bytes = 0;
  // CUDA compute capability "major.minor" ("9.0"), or the gfx target of an AMD GPU ("gfx942").
  std::string compute_capability;
  double bf16_dense_tflops = 0;            // Tensor Core peak, no sparsity
  std::optional<double> fp8_dense_tflops;  // absent: no FP8 Tensor Cores
  double hbm_bandwidth_gbps = 0;           // device memory bandwidth, GB/s (1e9 B/s)
  double interconnect_bandwidth_gbps = 0;  // NVLink / xGMI per GPU, GB/s; 0 = PCIe only
  int gpus_per_node = 8;                   // GPUs per server / NVLink unit
  // What the step-time model reads (docs/step-time.md):
  int sm_count = 0;                        // streaming multiprocessors (AMD: compute units)
  std::optional<double> fp4_dense_tflops;  // absent: no FP4 Tensor Cores
  int nvlink_domain_gpus = 8;              // GPUs one NVLink fabric joins (NVL72: 72)
  double scaleout_bandwidth_gbps = 0;      // network per GPU and direction between nodes
  double host_link_bandwidth_gbps = 0;     // GPU <-> CPU per direction (PCIe, NVLink-C2C)
  double host_memory_bandwidth_gbps = 0;   // the server's CPU DRAM bandwidth per GPU
  // Citation per number: keys "total_memory_bytes", "cuda_context_bytes", "compute",
  // "hbm_bandwidth_gbps", "interconnect_bandwidth_gbps", "gpus_per_node", "sm_count",
  // "nvlink_domain_gpus", "scaleout_bandwidth_gbps", "host_link_bandwidth_gbps",
  // "host_memory_bandwidth_gbps" (and "fp4_dense_tflops" where there is one).
  std::map<std::string, std::string> sources;
};

// Every catalog entry, in catalog order. Thread-safe; parsed once.
const std::vector<GpuSpec>& AllGpus();

// The entry whose name or alias matches `name` ignoring case, spaces, '_' and '-'
// ("H100", "h100_sxm_80gb" and "NVIDIA H100 80GB HBM3" all find h100-sxm-80gb).
// Errors: kNotFound (field "memtune.gpu") naming the value, with a did-you-mean hint and
// the list of catalog names.
// Example: FindGpu("h100")->total_memory_bytes == 85520809984
Result<GpuSpec> FindGpu(std::string_view name);

// FindGpu without the copy: the catalog entry itself (valid for the program's life), found
// by an exact name first, so hot paths that hold a catalog name pay no folding.
Result<const GpuSpec*> FindGpuEntry(std::string_view name);

}  // namespace memtune::model
