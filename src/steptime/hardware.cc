// JobHardware: the catalog entry of memtune.gpu in SI units.
#include "steptime/hardware.h"

#include <algorithm>

namespace memtune::steptime {

double Hardware::PeakFlops(GemmDtype dtype) const {
  switch (dtype) {
    case GemmDtype::kFp4:
      if (fp4_flops > 0) return fp4_flops;
      [[fallthrough]];
    case GemmDtype::kFp8:
      if (fp8_flops > 0) return fp8_flops;
      [[fallthrough]];
    case GemmDtype::kBf16:
      return bf16_flops;
    case GemmDtype::kFp32:
      return bf16_flops / 2;  // TF32 Tensor Cores run at half the BF16 rate
  }
  return bf16_flops;
}

Hardware Hardware::WithoutSms(int sms) const {
  Hardware out = *this;
  const int left = std::max(1, sm_count - sms);
  const double share = static_cast<double>(left) / sm_count;
  out.sm_count = left;
  out.bf16_flops *= share;
  out.fp8_flops *= share;
  out.fp4_flops *= share;
  return out;
}

Result<Hardware> JobHardware(const model::Job& job) {
  if (job.memtune.gpu.empty()) {
    return InvalidConfig("memtune.gpu", "the step-time model needs the GPU, and the job names none",
                         "set memtune.gpu to a catalog name ('memtune gpus' lists them)");
  }
  MEMTUNE_TRY(const model::GpuSpec* gpu, model::FindGpuEntry(job.memtune.gpu));
  Hardware hw;
  hw.bf16_flops = gpu->bf16_dense_tflops * 1e12;
  hw.fp8_flops = gpu->fp8_dense_tflops.value_or(0) * 1e12;
  hw.fp4_flops = gpu->fp4_dense_tflops.value_or(0) * 1e12;
  hw.hbm_bytes_per_s = gpu->hbm_bandwidth_gbps * 1e9;
  // The catalog's NVLink figure sums both directions; a GPU without NVLink talks over PCIe.
  hw.nvlink_bytes_per_s = gpu->interconnect_bandwidth_gbps > 0
                              ? gpu->interconnect_bandwidth_gbps / 2 * 1e9
                              : gpu->host_link_bandwidth_gbps * 1e9;
  hw.network_bytes_per_s = gpu->scaleout_bandwidth_gbps * 1e9;
  hw.host_link_bytes_per_s = gpu->host_link_bandwidth_gbps * 1e9;
  hw.host_memory_bytes_per_s = gpu->host_memory_bandwidth_gbps * 1e9;
  hw.sm_count = std::max(1, gpu->sm_count);
  hw.gpus_per_node = std::max(1, job.memtune.gpus_per_node);
  hw.nvlink_domain_gpus = std::max(hw.gpus_per_node, gpu->nvlink_domain_gpus);
  return hw;
}

}  // namespace memtune::steptime
