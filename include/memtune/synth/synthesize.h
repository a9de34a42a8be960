// Trace synthesis: from a job, the sequence of allocations and frees one pipeline rank's
// PyTorch caching allocator sees during start-up and `iterations` training iterations, in
// Megatron-Core's order, with the sizes of the accurate estimator's per-tensor model
// (src/estimate/activations.h, layer_tensors.h, model_state.h). docs/synth.md describes
// every phase and the simplifications.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>

#include "memtune/core/result.h"
#include "memtune/estimate/estimate.h"
#include "memtune/model/job.h"
#include "memtune/synth/events.h"

namespace memtune::synth {

struct SynthOptions {
  int iterations = 2;  // training iterations after start-up (>= 1; 2 reaches steady state)
  std::optional<std::int64_t> num_microbatches;  // default: GBS / (MBS * DP)
};

// What one rank's trace adds up to (filled by Synthesize).
struct TraceSummary {
  std::int64_t events = 0;
  std::int64_t persistent_bytes = 0;  // live at the end: model state (== estimator's)
};

class Plan;  // per-job sizes, computed once (src/synth/plan.h)

// A job prepared for synthesis: the per-tensor sizes and the pipeline layout, computed once
// and reused for every rank. Immutable; safe to share between threads.
class TraceSynthesizer {
 public:
  // Errors: kUnsupported for Megatron-FSDP jobs, full-iteration CUDA graphs and FSDP2 jobs
  // outside MakeFsdp2Facts' model (src/estimate/fsdp2_tensors.h);
  // kInvalidConfig from the pipeline layout (as the estimator reports them);
  // kInvalidInput for iterations < 1.
  static Result<TraceSynthesizer> Create(const model::Job& job, const SynthOptions& options = {});
  ~TraceSynthesizer();
  TraceSynthesizer(TraceSynthesizer&&) noexcept;
  TraceSynthesizer& operator=(TraceSynthesizer&&) noexcept;

  int num_stages() const;  // pipeline ranks
  int iterations() const;
  // The index of the last micro-batch of an iteration (micro-batches per step - 1).
  int last_microbatch() const;

  // Streams the events of pipeline rank `pp_rank` (0 <= pp_rank < num_stages()) into
  // `sink`, stopping early when the sink returns false. Deterministic.
  TraceSummary Synthesize(int pp_rank, EventSink& sink) const;

 private:
  explicit TraceSynthesizer(std::unique_ptr<Plan> plan);
  std::unique_ptr<Plan> plan_;
};

// Writes rank `pp_rank`'s events in the simulator's trace format (docs/trace-format.md):
// "alloc h<id> <bytes>  # <label>" and "free h<id>  # <label>", after a header comment.
// Returns the summary.
TraceSummary WriteTrace(const TraceSynthesizer& synth, int pp_rank, std::ostream& out);

}  // namespace memtune::synth
