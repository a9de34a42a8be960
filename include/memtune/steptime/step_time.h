// Step time: how long one training iteration (one global batch) takes on each GPU, from the
// job and the GPU catalog, term by term.
//
// An analytic model, no profiling: every GEMM of every layer is timed from its shape
// (Tensor-Core peak of its dtype, the tiles the GPU runs at once, memory traffic), attention
// from flash-attention's executed FLOPs, element-wise kernels from HBM bandwidth, and
// collectives from the link they cross (NVLink inside the NVLink domain, the network beyond),
// with the overlap each Megatron / Transformer Engine / FSDP2 setting gives. Host (CPU)
// dispatch time bounds each phase from below where kernels are small; CUDA graphs remove it
// for the captured scope. The pipeline schedule (1F1B, interleaved) adds the bubble of the
// job's micro-batch count; data-parallel traffic, the optimizer step and CPU offload follow.
// Each rule and constant cites its source in docs/step-time.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "memtune/core/result.h"
#include "memtune/model/job.h"

namespace memtune::steptime {

// How a source counts model FLOPs (docs/step-time.md, "FLOP conventions").
enum class FlopsFormula {
  kCausal,     // Megatron-LM since 8873b55d6a (2025-03-06), Bridge 25.09+: causal halved
  kNoncausal,  // older Megatron-LM, NeMo 24.x, torchtitan, Korthikanti et al. 2022
};

// One term of the step time of the critical pipeline rank, in seconds.
struct StepTerm {
  std::string_view name;  // e.g. "gemm", "tp_comm_exposed" (a literal)
  double seconds = 0;
  std::string detail;  // one line: what it counts
};

struct StepTime {
  double step_time_s = 0;           // one iteration, wall clock
  double tokens_per_s_per_gpu = 0;  // global batch tokens / step time / world size
  // Model FLOPs of one global batch (Megatron-LM num_floating_point_operations; recompute
  // never counted), in both conventions.
  double model_flops_causal = 0;
  double model_flops_noncausal = 0;
  double peak_bf16_tflops = 0;  // the GPU's dense BF16 peak (the MFU denominator)
  int critical_pp_rank = 0;     // the pipeline rank whose work sets the step
  std::vector<StepTerm> terms;  // sums to step_time_s

  // Model TFLOP/s per GPU as a source using `formula` reports it.
  double TflopsPerGpu(FlopsFormula formula, int world_size) const;
  // Model FLOPs utilisation (0..1) against the BF16 dense peak.
  double Mfu(FlopsFormula formula, int world_size) const;
};

// Predicts the step time of `job` (a resolved job: model::ResolveJob's output).
// Errors: kInvalidConfig naming memtune.gpu when the job names no catalog GPU (the
// hardware is what the model is made of), or the field that keeps the pipeline from being
// laid out (estimate::BuildPipelineLayout's errors).
// Example: the llama3-70b-32xh100 example job -> about 2.5 s per step.
Result<StepTime> PredictStepTime(const model::Job& job);

// The hardware check PredictStepTime starts with: kInvalidConfig naming memtune.gpu when
// the job names no catalog GPU.
Status JobHardwareCheck(const model::Job& job);

// Parses "causal" / "noncausal"; kInvalidInput naming `field` otherwise.
Result<FlopsFormula> ParseFlopsFormula(std::string_view name, std::string_view field);

}  // namespace memtune::steptime
