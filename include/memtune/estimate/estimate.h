// Per-rank memory estimate of a training job: the report every estimator mode fills.
//
// Modes: kAccurate (memtune's per-tensor account, the default), kMegatronLm (Megatron-LM
// report_theoretical_memory to the byte) and kBridge (Megatron-Bridge
// estimate_training_memory to the byte). See docs/estimator.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/core/result.h"
#include "memtune/model/job.h"

namespace memtune::estimate {

enum class Mode { kAccurate, kMegatronLm, kBridge };

// "accurate", "megatron-lm", "bridge".
const char* ModeName(Mode mode);
// Parses a mode name; kInvalidInput naming `field` with the allowed names otherwise.
Result<Mode> ParseMode(std::string_view name, std::string_view field);

// What a component's bytes are: model state (kParameters, kGradients, kOptimizer; summed in
// RankEstimate::model_state_bytes), activations (kActivations, kLogits; activation_bytes) or
// a transient working set (kTransient; transient_bytes). kParameters also holds the other
// persistent per-rank state: buffers, library workspaces, MCore's score buffer.
enum class ComponentKind { kParameters, kGradients, kOptimizer, kActivations, kLogits, kTransient };

// One named part of a rank's allocated memory.
struct Component {
  // Stable key, e.g. "params.fp8", "opt.exp_avg": a view of static storage (every producer
  // names its components with literals), so an estimate copies no name strings.
  std::string_view name;
  std::int64_t bytes = 0;
  ComponentKind kind = ComponentKind::kParameters;
  bool expert = false;      // routed-expert share (the dense/embedding vs expert split)
  std::string explanation;  // one line: which tensors, how sized and sharded
};

// One pipeline stage's rank class (TP/CP/EP ranks within a stage are alike).
struct RankEstimate {
  int pp_rank = 0;
  std::vector<Component> components;
  std::int64_t allocated_bytes = 0;    // peak allocated by PyTorch's allocator
  std::int64_t model_state_bytes = 0;  // parameters + gradients + optimizer state
  std::int64_t activation_bytes = 0;   // kept for backward at the peak (all in flight)
  std::int64_t transient_bytes = 0;    // workspace live at the peak
  std::int64_t dense_bytes = 0;        // model state of dense/embedding parameters
  std::int64_t expert_bytes = 0;       // model state of routed-expert parameters
  int layers = 0;                      // transformer layers built on this stage
  int in_flight_microbatches = 0;      // peak live (chunk, micro-batch) pairs
  // When the peak happens: "backward" (first backward after the warm-up forwards, all
  // in-flight activations held) or "optimizer step" (activations freed, optimizer
  // temporaries live); FSDP2 jobs also "loss backward" (the cross-entropy backward's fp32
  // logits) and "forward" (a block's forward, on pipeline ranks caching many micro-batches).
  // Empty in the compatibility modes. A view of a literal, like Component::name.
  std::string_view peak_phase;
  std::int64_t step_peak_bytes = 0;      // accurate mode: the optimizer-step total
  std::int64_t backward_peak_bytes = 0;  // accurate mode: the forward/backward total
  // Accurate mode, PP > 1: what the rank keeps from one iteration to the next besides
  // model state: each model chunk fed by the previous stage holds its last micro-batch's
  // received input and that input's gradient (MCore TransformerBlock.input_tensor, whose
  // grad schedules.py backward_step retains) until the chunk's next forward. In
  // step_peak_bytes; gone again before the next iteration's first backward.
  std::int64_t carried_bytes = 0;
};

// The whole estimate.
struct Estimate {
  Mode mode = Mode::kAccurate;
  std::vector<RankEstimate> ranks;          // one per pipeline stage (compat modes: the one
                                            // stage upstream models, see docs/estimator.md)
  int peak_pp_rank = 0;                     // the most loaded stage
  std::int64_t peak_allocated_bytes = 0;    // compat modes: upstream's total, in bytes
  std::int64_t gpu_capacity_bytes = 0;      // total device memory (0 = GPU unknown)
  std::vector<std::string> assumptions;     // what the model assumes (upstream strings in compat)
  std::vector<std::string> upstream_lines;  // compat modes: what upstream would print
};

// Options.
struct EstimateOptions {
  Mode mode = Mode::kAccurate;
  // Micro-batches per step; default: GBS / (MBS * DP) from the job.
  std::optional<std::int64_t> num_microbatches;
  // Fill Component::explanation (accurate mode). Sweeps that only need the numbers (a
  // planner comparing thousands of layouts) turn it off to skip the string copies.
  bool with_explanations = true;
};

// Estimates per-rank memory of `job` (effective values, see model/job.h).
// Errors: kInvalidConfig naming the field when the layout is inconsistent (run the checks
// first for the full list); kUnsupported for a feature the mode cannot estimate.
// Example: EstimateMemory(job, {.mode = Mode::kBridge})->peak_allocated_bytes.
Result<Estimate> EstimateMemory(const model::Job& job, const EstimateOptions& options = {});

}  // namespace memtune::estimate
