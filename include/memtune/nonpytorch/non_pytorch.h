// Device memory a training process holds outside PyTorch's caching allocator, per pipeline
// rank and part by part: the driver's reserve (when the capacity is nvidia-smi's total), the
// CUDA context and module images, NCCL's buffers per communicator the rank runs collectives
// on, and Transformer Engine's userbuffers. Each part has a central value, the range its
// sources document, and the moment of the run it appears at (NCCL connects lazily, at the
// first collective of each algorithm, so most of it appears during iteration 1).
// Formulas and sources: docs/non-pytorch.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memtune/core/result.h"
#include "memtune/model/gpu_catalog.h"
#include "memtune/model/job.h"

namespace memtune::nonpytorch {

// When a part appears, in run order. The allocator replay shrinks the simulated device by
// the part's bytes from that moment on (synth/forecast.h).
enum class Moment : std::uint8_t {
  kStartup,            // process start, initialize_ub, the init barrier on the world group
  kFirstForward,       // iteration 1's first forward (TP, CP, EP collectives, pipeline sends)
  kFirstGradSync,      // the first data-parallel gradient reduce (last micro-batch's backward)
  kFirstOptimizerStep  // iteration 1's optimizer step (grad norm, model-parallel reductions)
};

// "startup", "first forward", "first gradient sync", "first optimizer step".
const char* MomentName(Moment moment);

// One part of the memory outside PyTorch.
struct Part {
  std::string key;              // the `non_pytorch` JSON key it adds to: "driver_reserved",
                                // "cuda_context", "nccl", "te_userbuffers"
  std::string name;             // e.g. "nccl.tp" (one NCCL communicator), "cuda_context"
  std::int64_t bytes = 0;       // central estimate
  std::int64_t low_bytes = 0;   // the documented range
  std::int64_t high_bytes = 0;  //
  Moment moment = Moment::kStartup;
  std::string detail;  // how it is made up, e.g. "4 ranks on 1 node: init 196 MiB + ring ..."
  // Held by the process (in NVML's per-process figure). False for the driver's reserve,
  // which only makes CUDA's capacity smaller than nvidia-smi's total.
  bool in_process = true;
};

// The settings the model reads, each from a job field or an env entry (memtune.env).
struct NcclSettings {
  int version = 22707;          // major*10000 + minor*100 + patch (memtune.versions.nccl)
  bool cumem = true;            // NCCL_CUMEM_ENABLE (default on, driver >= 12.0)
  bool runtime_connect = true;  // NCCL_RUNTIME_CONNECT (default 1 since 2.22)
  bool nvls = true;             // NCCL_NVLS_ENABLE (default on where NVLink SHARP exists)
  std::int64_t buffsize_bytes = 4 * 1024 * 1024;      // NCCL_BUFFSIZE (Simple)
  std::int64_t ll_buffsize_bytes = 512 * 1024;        // NCCL_LL_BUFFSIZE
  std::int64_t ll128_buffsize_bytes = 4800 * 1024;    // NCCL_LL128_BUFFSIZE
  std::int64_t p2p_net_chunksize_bytes = 128 * 1024;  // NCCL_P2P_NET_CHUNKSIZE
  std::int64_t p2p_nvl_chunksize_bytes = 512 * 1024;  // NCCL_P2P_NVL_CHUNKSIZE
  int min_channels = 0;                               // NCCL_MIN_NCHANNELS (0 = unset)
  int max_channels = 0;                               // NCCL_MAX_NCHANNELS (0 = unset)
};

// The NCCL settings of the job's launch environment and memtune.versions.nccl.
// Errors: kInvalidConfig naming the env entry or field, its value and what is allowed.
Result<NcclSettings> ReadNcclSettings(const model::Job& job);

// The memory outside PyTorch on one pipeline rank.
struct NonPytorchMemory {
  std::vector<Part> parts;  // in Moment order, then as listed in docs/non-pytorch.md

  std::int64_t TotalBytes() const;
  std::int64_t LowBytes() const;
  std::int64_t HighBytes() const;
  // The sum of the parts with `key` (0 when none).
  std::int64_t KeyBytes(const std::string& key) const;
  // The sum of the parts not held by the process (the driver's reserve).
  std::int64_t OutsideProcessBytes() const;
  // The keys present, in first-appearance order.
  std::vector<std::string> Keys() const;
};

// The parts for pipeline rank `pp_rank` (the rank with tensor, context and data-parallel
// rank 0) of `job` on `gpu` (nullptr: no GPU named; the context then uses the catalog's
// H100 figures and no driver reserve is counted). An FSDP2 job counts the context and the
// communicators torchtitan's mesh runs. Errors: those of ReadNcclSettings.
Result<NonPytorchMemory> EstimateNonPytorch(const model::Job& job, const model::GpuSpec* gpu,
                                            int pp_rank);

}  // namespace memtune::nonpytorch
