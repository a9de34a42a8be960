// Kernel and collective times (docs/step-time.md, "Kernels" and "Collectives").
#include "steptime/kernels.h"

#include <algorithm>
#include <cmath>

namespace memtune::steptime {
namespace {

double InputBytes(GemmDtype dtype) {
  switch (dtype) {
    case GemmDtype::kFp4:
      return 0.5;
    case GemmDtype::kFp8:
      return 1;
    case GemmDtype::kBf16:
      return 2;
    case GemmDtype::kFp32:
      return 4;
  }
  return 2;
}

double LargeGemmEfficiency(GemmDtype dtype, const Hardware& hw) {
  // FP8 / FP4 GEMMs on hardware without them fall back to BF16 (PeakFlops does too).
  const bool low_precision = (dtype == GemmDtype::kFp8 && hw.fp8_flops > 0) ||
                             (dtype == GemmDtype::kFp4 && (hw.fp4_flops > 0 || hw.fp8_flops > 0));
  return low_precision ? kGemmEfficiencyFp8 : kGemmEfficiencyBf16;
}

}  // namespace

// CTA tiles cuBLAS / CUTLASS kernels use on Hopper and Ampere, with the fraction of the
// large-tile rate each sustains (smaller tiles reuse each loaded operand less).
struct Tile {
  double m, n, rate;
};
constexpr Tile kTiles[] = {{128, 256, 1.0}, {128, 128, 0.9}, {128, 64, 0.8}, {64, 64, 0.6}};

double GemmSeconds(double m, double n, double k, GemmDtype dtype, const Hardware& hw) {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  const double flops = 2 * m * n * k;
  const double peak = hw.PeakFlops(dtype) * LargeGemmEfficiency(dtype, hw);
  // The multistage pipeline holds a fixed number of bytes per stage (BLOCK_K 64 for BF16,
  // 128 for FP8), so its fill spans more K elements the narrower the input.
  const double fill_k = kGemmPipelineFillK * 2 / InputBytes(dtype);
  const double prologue = k / (k + fill_k);
  const double base_bytes = (m * k + k * n) * InputBytes(dtype) + m * n * 2;
  double best = 0;
  // The kernel a heuristic would pick: the tile and split-K (each split keeps a K loop of
  // at least 2048, its FP32 partial sums cost a write and a read) that finish first, with
  // the last wave of tiles only partly filling the SMs (wave quantization).
  for (const Tile& tile : kTiles) {
    for (double split = 1; split <= 4; split *= 2) {
      if (split > 1 && k / split < 2048) break;
      const double ctas = std::ceil(m / tile.m) * std::ceil(n / tile.n) * split;
      const double waves = std::ceil(ctas / hw.sm_count);
      const double fill = ctas / (waves * hw.sm_count);
      const double compute = flops / (peak * tile.rate * fill * prologue);
      const double bytes = base_bytes + (split > 1 ? m * n * 4 * 2 * split : 0);
      const double t = std::max(compute, bytes / (hw.hbm_bytes_per_s * kHbmEfficiency));
      if (best == 0 || t < best) best = t;
    }
  }
  return best + kKernelSeconds;
}

double AttentionSeconds(double flops, bool backward, const Hardware& hw) {
  if (flops <= 0) return 0;
  const double efficiency = backward ? kAttentionBwdEfficiency : kAttentionFwdEfficiency;
  return flops / (hw.bf16_flops * efficiency) + kKernelSeconds;
}

double MemorySeconds(double bytes, const Hardware& hw) {
  if (bytes <= 0) return 0;
  return bytes / (hw.hbm_bytes_per_s * kHbmEfficiency) + kKernelSeconds;
}

Link GroupLink(int size, int stride, const Hardware& hw) {
  stride = std::max(1, stride);
  const double span = static_cast<double>(size - 1) * stride + 1;
  Link link;
  const double nvlink = hw.nvlink_bytes_per_s * kNvlinkEfficiency;
  if (span <= hw.nvlink_domain_gpus) {
    link.bytes_per_s = nvlink;
    link.latency_s = kNvlinkLatencySeconds;
    return link;
  }
  const double per_domain = std::clamp(static_cast<double>(hw.nvlink_domain_gpus / stride), 1.0,
                                       static_cast<double>(size));
  link.bytes_per_s = std::min(nvlink, hw.network_bytes_per_s * kNetworkEfficiency * per_domain);
  link.latency_s = kNetworkLatencySeconds;
  link.nvlink = false;
  return link;
}

double CollectiveSeconds(Collective kind, double bytes, int ranks, const Link& link) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const double n = ranks;
  // Bytes each rank sends (NCCL's "bus bandwidth" convention, nccl-tests PERFORMANCE.md).
  double sent = 0;
  switch (kind) {
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
      sent = bytes * (n - 1) / n;
      break;
    case Collective::kAllReduce:
      sent = 2 * bytes * (n - 1) / n;
      break;
    case Collective::kSendRecv:
      sent = bytes;
      break;
  }
  return link.latency_s + sent / std::max(1.0, link.bytes_per_s);
}

}  // namespace memtune::steptime
