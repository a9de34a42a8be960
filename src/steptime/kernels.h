// Time of single GPU kernels and NCCL collectives from their sizes (docs/step-time.md,
// "Kernels" and "Collectives").
#pragma once

#include "steptime/hardware.h"

namespace memtune::steptime {

// One GEMM C[m,n] = A[m,k] B[k,n] in `dtype` (inputs of `in_bytes`, output BF16):
// max(compute, memory) + the launch gap. Compute runs at peak x the large-GEMM efficiency,
// scaled by the SM fill when the output has fewer tiles than SMs (split-K may raise it) and
// by the mainloop prologue k / (k + kGemmPipelineFillK); memory reads A, B and writes C.
double GemmSeconds(double m, double n, double k, GemmDtype dtype, const Hardware& hw);

// Flash attention over `flops` executed FLOPs (forward or backward).
double AttentionSeconds(double flops, bool backward, const Hardware& hw);

// A memory-bound kernel moving `bytes` through HBM.
double MemorySeconds(double bytes, const Hardware& hw);

// The bandwidth a ring collective of one process group gets per rank and direction.
struct Link {
  double bytes_per_s = 0;  // achieved (efficiency applied)
  double latency_s = 0;    // one collective's fixed cost
  bool nvlink = true;
};

// The link of a process group of `size` ranks whose members are `stride` global ranks apart
// (Megatron's rank order tp-cp-ep-dp-pp). Inside one NVLink domain: NVLink. Spanning
// domains, NCCL runs one channel per NIC, so the ring's domain crossings share the NICs of
// every group member in a domain: min(NVLink, network x members per domain).
Link GroupLink(int size, int stride, const Hardware& hw);

enum class Collective { kAllGather, kReduceScatter, kAllReduce, kAllToAll, kSendRecv };

// A ring collective over `ranks` ranks; `bytes` is the full (unsharded) buffer of one rank:
// the gathered output of an all-gather, the input of a reduce-scatter / all-reduce, what one
// rank sends in an all-to-all or a send/recv. 0 when ranks <= 1.
double CollectiveSeconds(Collective kind, double bytes, int ranks, const Link& link);

}  // namespace memtune::steptime
