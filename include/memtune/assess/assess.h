// AssessJob: the one library call that answers "will this job fit, and what should I do".
// It runs the per-rank estimate, the allocator forecast under both segment modes (accurate
// mode), decides a verdict per mode and lists the playbook's advice as data. Renderers
// (report/), the CLI and bindings only format an Assessment; nothing here prints.
// docs/assess.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/alloc/config.h"
#include "memtune/core/result.h"
#include "memtune/estimate/estimate.h"
#include "memtune/model/job.h"
#include "memtune/nonpytorch/non_pytorch.h"
#include "memtune/synth/forecast.h"

namespace memtune::assess {

enum class AllocatorMode { kNative, kExpandable };
// "native", "expandable" (the keys of estimate --format json's "verdict").
std::string_view AllocatorModeName(AllocatorMode mode);

enum class VerdictState {
  kFits,    // the margin is larger than the prediction's uncertainty
  kAtRisk,  // it fits, but by less than the prediction's uncertainty
  kOom,     // the simulated allocator raises OutOfMemoryError
};
// "fits", "at_risk", "oom".
std::string_view VerdictStateName(VerdictState state);

// The relative uncertainty of a predicted peak reserved that AssessOptions assumes by
// default: the 90th-percentile absolute error of memtune's max_reserved predictions over
// the real Megatron-LM CI runs in tests/data (docs/assess.md gives the command that
// measures it). A spare below this share of the peak is "at risk".
inline constexpr double kDefaultReservedUncertainty = 0.05;

// One allocator mode's verdict for the whole job: the rank that decides it.
struct ModeVerdict {
  AllocatorMode mode = AllocatorMode::kNative;
  bool job_config = false;  // the mode the job runs with (its own allocator config)
  std::string alloc_conf;   // the allocator settings simulated ("" = PyTorch's defaults)
  VerdictState state = VerdictState::kFits;
  // Usable memory (capacity - the rank's memory outside PyTorch) minus the deciding rank's
  // peak need, in bytes.
  // When it fits: the need is its replay's peak reserved under the capacity, so the margin
  // is what was left at the tightest moment. Under kOom it is negative: minus how much more
  // capacity the rank needs to run without an OOM (bisection over replays to within 64 MiB
  // or 1/256 of the search range, rounded up).
  std::int64_t margin_bytes = 0;
  // The deciding rank's uncertainty band (kAtRisk when it fits with margin < band): the
  // root sum of squares of the reserved prediction's (reserved_uncertainty x its peak
  // reserved) and the memory outside PyTorch's (its documented high minus central value),
  // two independent sources of error.
  std::int64_t uncertainty_bytes = 0;
  std::int64_t non_pytorch_bytes = 0;  // the deciding rank's memory outside PyTorch
  int pp_rank = 0;          // the deciding rank: the worst state, then the smallest margin (kOom:
                            // the largest peak reserved without a capacity limit)
  std::string moment;       // kOom: the allocation that failed; else the event at the reserved peak
  std::string oom_message;  // kOom: the text PyTorch (or NCCL) raises on that rank
  // kOom outside PyTorch: the part that could not be allocated when it appeared (e.g.
  // "nccl.dp"); "" when PyTorch's allocator ran out.
  std::string oom_outside_part;
};

// The allocated-memory verdict of the estimate alone (before fragmentation).
struct AllocatedFit {
  int pp_rank = 0;                  // the rank with the least headroom
  std::int64_t usable_bytes = 0;    // its capacity - memory outside PyTorch
  std::int64_t headroom_bytes = 0;  // its usable - allocated peak
  bool fits = false;                // headroom >= 0
};

// One job-field edit: the field path (docs/job-format.md names) and the new value as JSON
// text ("\"expandable_segments:True\"", "8", "true").
struct FieldChange {
  std::string field;
  std::string value_json;
};

// The id of the Quick Decision step 1 advice: set expandable segments (docs/assess.md).
inline constexpr std::string_view kExpandableSegmentsAdvice = "allocator.expandable-segments";

// One piece of advice, as the playbook orders it (../seed memory-tuning.md, docs/assess.md).
struct Advice {
  std::string id;                    // stable, e.g. "allocator.expandable-segments"
  std::string playbook_step;         // e.g. "Quick Decision step 1"
  std::vector<FieldChange> changes;  // the edits; empty when the advice names no single edit
  // Predicted change of the deciding margin in bytes (positive = more room); 0 when the
  // advice names no edit.
  std::int64_t effect_bytes = 0;
  std::string text;  // one or two sentences for people
};

struct AssessOptions {
  estimate::EstimateOptions estimate;  // mode, micro-batches, explanations
  // Simulate the allocator (accurate mode only): the forecast, per-mode verdicts and the
  // allocator advice. Off: the estimate and its allocated fit only.
  bool simulate_allocator = true;
  int iterations = 2;  // training iterations synthesized and replayed (1 to 100)
  // The PyTorch release whose allocator rules apply; nullopt = the job's
  // memtune.versions.torch, else alloc::kDefaultTorchVersion.
  std::optional<alloc::TorchVersion> torch_version;
  double reserved_uncertainty = kDefaultReservedUncertainty;  // see the constant; 0 to 1
};

struct Assessment {
  estimate::Estimate estimate;
  // The memory outside PyTorch of each estimated rank ([i] for estimate.ranks[i]).
  std::vector<nonpytorch::NonPytorchMemory> non_pytorch;
  std::optional<AllocatedFit> allocated_fit;  // nullopt when the GPU capacity is unknown
  std::optional<synth::Forecast> forecast;    // accurate mode with simulate_allocator
  std::string forecast_note;  // why there is no forecast for a job it cannot synthesize
  // One per mode, the job's own first, when there is a forecast and a known capacity.
  std::vector<ModeVerdict> verdicts;
  std::vector<Advice> advice;  // best first
};

// Estimates, forecasts and judges `job` (an effective job, model/job.h).
// Errors: those of estimate::EstimateMemory; kInvalidConfig naming the memtune.env field
// when the allocator config or an NCCL setting does not parse (PyTorch's message, or the
// entry, its value and what is allowed), or memtune.versions.torch when it names a release
// the allocator rules do not know; kInvalidInput naming
// "iterations" or "reserved_uncertainty" when out of range. A job the synthesizer does not
// model is not an error: the forecast is absent and forecast_note says why.
// Example: AssessJob(job)->verdicts.front().state == VerdictState::kFits.
Result<Assessment> AssessJob(const model::Job& job, const AssessOptions& options = {});

// The PyTorch release whose allocator rules AssessJob applies: options.torch_version, else
// the job's memtune.versions.torch, else alloc::kDefaultTorchVersion.
// Errors: kInvalidConfig naming memtune.versions.torch for a release the rules do not know.
Result<alloc::TorchVersion> EffectiveTorchVersion(const model::Job& job,
                                                  const AssessOptions& options);

// The verdict of `mode` in `a`, or nullptr when there is none.
const ModeVerdict* FindVerdict(const Assessment& a, AllocatorMode mode);

}  // namespace memtune::assess
