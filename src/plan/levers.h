// The search space of the planner: every layout and lever setting a job allows, applied to
// the job, and the field changes each one makes (docs/plan.md, "Search space").
#pragma once

#include <string>
#include <vector>

#include "memtune/assess/assess.h"
#include "memtune/model/job.h"

namespace memtune::plan {

// One recompute setting the planner tries.
struct RecomputeChoice {
  std::string name;  // for reasons: "none", "selective core_attn", "full", ...
  model::RecomputeGranularity granularity = model::RecomputeGranularity::kNone;
  model::RecomputeMethod method = model::RecomputeMethod::kNone;
  int num_layers = 0;
  std::vector<std::string> modules;
};

struct Levers {
  int tp = 1, pp = 1, vpp = 0, cp = 1, ep = 1;  // vpp 0 = no interleaving
  int mbs = 1;
  int recompute = 0;             // index into the recompute choices; 0 = the job's own
  double optimizer_offload = 0;  // fraction on the CPU; 0 = off
  bool regather = false;         // peft.sequence_parallel_input_regather
};

// Recompute settings to try: the job's own first.
std::vector<RecomputeChoice> RecomputeChoices(const model::Job& job);

// The job's current levers (recompute 0).
Levers CurrentLevers(const model::Job& job);

// Every combination the job allows on `gpus` GPUs, fields in `keep` held at the job's value.
std::vector<Levers> EnumerateLevers(const model::Job& job, int gpus,
                                    const std::vector<std::string>& keep,
                                    const std::vector<RecomputeChoice>& recompute);

// One-lever changes of the current job the playbook names (more TP, more PP at the cost of
// DP, deeper interleaving, each recompute setting, optimizer CPU offload, LoRA re-gather),
// each with its label, skipping fields in `keep`.
std::vector<std::pair<std::string, Levers>> PlaybookAlternatives(
    const model::Job& job, int gpus, const std::vector<std::string>& keep,
    const std::vector<RecomputeChoice>& recompute);

// The job with the levers applied (world size `gpus`); layout-bound fields that no longer
// hold (an explicit pipeline layout, first/last stage sizes) are cleared, TP overlap and
// sequence parallelism follow TP.
model::Job ApplyLevers(const model::Job& job, const Levers& levers, int gpus,
                       const std::vector<RecomputeChoice>& recompute);

// The field edits from `from` to `to`, as JSON values.
std::vector<assess::FieldChange> JobChanges(const model::Job& from, const model::Job& to);

}  // namespace memtune::plan
