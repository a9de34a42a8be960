// The planner: the changes to a job that make it fit, ranked by predicted throughput.
//
// It searches the layouts and levers the job allows (TP, PP, VPP, CP, EP, micro-batch
// size, recompute, optimizer CPU offload, LoRA input re-gather) on the job's GPU count (or
// another), drops what model::CheckJob rejects, ranks the rest by the step-time model
// (steptime/step_time.h) and memory (the estimate plus memory outside PyTorch), and runs the
// allocator simulation (assess::AssessJob) only on the best candidates that could fit, under
// both allocator modes: a candidate that fits only with expandable segments says so in its
// changes. Recipe: docs/plan.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "memtune/assess/assess.h"
#include "memtune/core/result.h"
#include "memtune/model/job.h"
#include "memtune/steptime/step_time.h"

namespace memtune::plan {

struct PlanOptions {
  // Job fields that keep the job's value ("model.tensor_model_parallel_size",
  // "train.micro_batch_size", "model.recompute_granularity", ...; PlanFieldNames lists them).
  std::vector<std::string> keep;
  std::optional<int> gpus;   // the GPU count to plan for; nullopt = the job's world size
  int limit = 8;             // fitting candidates returned
  int max_simulations = 24;  // allocator simulations at most (each ~30-100 ms)
  // When nothing fits: also try 2x, 4x, ... the GPU count up to this factor.
  int max_gpu_factor = 16;
  int iterations = 2;  // training iterations each simulation replays
};

// The verdict of one candidate under one allocator mode.
struct ModeResult {
  assess::AllocatorMode mode = assess::AllocatorMode::kNative;
  assess::VerdictState state = assess::VerdictState::kOom;
  std::int64_t margin_bytes = 0;
};

struct Candidate {
  std::vector<assess::FieldChange> changes;  // edits of the job, in field order
  model::Job job;                            // the job with the changes applied
  steptime::StepTime step;
  double relative_throughput = 1;    // tokens/s/GPU vs the current job's prediction
  std::vector<ModeResult> verdicts;  // both modes (simulated candidates only)
  bool simulated = false;
  // The allocator mode the candidate is ranked under (the job's own when it fits there).
  assess::AllocatorMode mode = assess::AllocatorMode::kNative;
  std::string reason;  // one line: what the change costs or gains, and why
  // The playbook's name for a one-lever alternative ("more TP", "recompute mlp", ...) or for
  // the free allocator fix ("expandable segments"); "" for a searched layout.
  std::string playbook;
};

struct Plan {
  Candidate current;  // the job as given (changes empty)
  // Non-empty when the job as given does not pass model::CheckJob (e.g. its layout needs
  // more GPUs than --gpus gives): the rule ids. Throughput is then relative to the best
  // candidate, and `current` has no prediction.
  std::string current_invalid;
  // Fitting candidates: first the cheapest fix when it costs no throughput (the job as it
  // is, or with the allocator setting only: Quick Decision step 1), then by predicted
  // throughput the best searched layouts and the playbook's one-lever alternatives.
  std::vector<Candidate> candidates;
  int gpus = 0;                // the GPU count planned for
  int searched = 0;            // candidates generated
  int rejected_by_checks = 0;  // dropped by model::CheckJob errors
  int rejected_by_memory = 0;  // allocated memory alone exceeds the GPU
  int simulated = 0;           // allocator simulations run
  // Empty when candidates fit; otherwise what blocks the job, and the smallest GPU count
  // found that fits (with its best candidate in `candidates`, gpus set to that count).
  std::string nothing_fits;
  // Playbook alternatives that are not among the candidates, with why: "refused by the
  // checks: <rule ids>", "allocated memory alone exceeds the GPU", "OOM in both allocator
  // modes".
  std::vector<std::pair<std::string, std::string>> dropped_alternatives;
};

// Plans `job` (a resolved job). Errors: the step-time model's (no GPU in the catalog) and
// an invalid option (kInvalidInput naming it: an unknown --keep field, gpus < 1).
Result<Plan> PlanJob(const model::Job& job, const PlanOptions& options = {});

// The fields --keep accepts.
std::vector<std::string> PlanFieldNames();

}  // namespace memtune::plan
