// Diagnose: from out-of-memory messages, training logs, nvidia-smi output and memory
// snapshots to one cause from a fixed taxonomy, the evidence in numbers, and the playbook's
// fixes in its order (../seed memory-tuning.md, "Quick Decision" and "Failure Diagnosis").
// The rules and their reasoning: docs/diagnose.md. Nothing here prints.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "memtune/alloc/config.h"
#include "memtune/core/result.h"
#include "memtune/model/job.h"
#include "memtune/snapshot/snapshot.h"

namespace memtune::diagnose {

// Why the job ran out of memory (or would).
enum class Cause {
  kFragmentation,        // the cache held enough free bytes, but no block could serve the request
  kCapacityModelState,   // parameters, gradients and optimizer state fill the GPU
  kCapacityActivations,  // activations (and other per-step tensors) fill the GPU
  kOtherProcess,         // other processes on the same GPU hold the missing memory
  kNonPytorch,           // memory outside PyTorch's allocator (NCCL, CUDA context, userbuffers)
  kLeak,                 // memory grows from iteration to iteration
  kImbalance,            // one rank or pipeline stage far above the others
  kCheckpointLoad,       // loading (or saving) a checkpoint
  kEvalOrGeneration,     // an evaluation or generation phase on top of training memory
  kConfigConflict,       // a setting combination that fails or is silently ignored
  kUnknown,              // not enough information; the notes say what is missing
};
// "fragmentation", "capacity_model_state", ..., "unknown" (the JSON ids).
std::span<const model::EnumName<Cause>> EnumNames(Cause);

enum class Confidence { kLow, kMedium, kHigh };
// "low", "medium", "high".
std::span<const model::EnumName<Confidence>> EnumNames(Confidence);

// One number (or fact) read from an input, with where it was read.
struct Evidence {
  std::string what;                         // e.g. "requested", "reserved but unallocated"
  std::optional<std::int64_t> value_bytes;  // sizes
  std::string value;                        // other values ("backward", "rank 3"), or ""
  std::string source;                       // the input's name
  int line = 0;                             // 1-based; 0 = not from a line (a replay)
  std::string text;                         // the line (excerpt), or what was computed
};

// One fix, in the playbook's order.
struct Fix {
  std::string id;    // stable, e.g. "allocator.expandable-segments"
  std::string text;  // what to change
  std::string cost;  // throughput cost in the playbook's words: "none", "~16%", ...
  // With a job: the predicted effect from the estimate and the allocator forecast, e.g.
  // "predicted reserved 70.20 GiB instead of 83.70 GiB; fits". "" without a job.
  std::string predicted;
  std::optional<std::int64_t> effect_bytes;  // predicted change of the margin (+ = more room)
};

// With a job: what the inputs show next to what memtune predicts.
struct JobComparison {
  std::int64_t predicted_allocated_bytes = 0;            // the peak stage's allocated peak
  std::optional<std::int64_t> predicted_reserved_bytes;  // its forecast, the job's allocator
  std::int64_t predicted_model_state_bytes = 0;
  std::int64_t predicted_activation_bytes = 0;
  std::optional<std::int64_t> observed_allocated_bytes;  // from the OOM message or the log
  std::optional<std::int64_t> observed_reserved_bytes;
  std::string attribution;  // where the difference comes from, in words
  // One per allocator mode, the job's own first: "native (the job's): oom, short by 2.10 GiB",
  // "expandable: fits, 3.40 GiB spare" (assess::ModeVerdict).
  std::vector<std::string> verdicts;
};

struct Diagnosis {
  Cause cause = Cause::kUnknown;
  Confidence confidence = Confidence::kLow;
  std::vector<Evidence> evidence;
  std::vector<Fix> fixes;
  std::vector<std::string> notes;
  std::optional<JobComparison> comparison;  // with a job only
};

// One input: text (a message, a log, nvidia-smi output) or a parsed snapshot.
struct DiagnoseInput {
  std::string name;  // file name (or "<stdin>"), used in evidence
  std::string text;  // empty for a snapshot
  std::optional<snapshot::Snapshot> snapshot;
};

// Recognises `bytes` by content: a snapshot (gzip, or a pickle: first byte 0x80) or text.
// Errors (kInvalidInput, field = name): "empty input"; "binary data that is not a memory
// snapshot (...)"; the snapshot reader's errors.
Result<DiagnoseInput> ReadDiagnoseInput(std::string name, std::string bytes);

struct DiagnoseOptions {
  // The job the inputs came from (--job): the capacity split between model state and
  // activations, the predicted effect of each fix, and the comparison. nullopt: none.
  std::optional<model::Job> job;
  alloc::TorchVersion torch_version = alloc::kDefaultTorchVersion;  // for snapshot replays
};

// The diagnosis of all inputs together (a message and the log around it, a snapshot).
// Errors: kInvalidInput "no input"; kInvalidInput naming the inputs when none holds anything
// diagnose reads, with what it looked for; the job's assessment errors (model/assess).
// Example:
//   auto in = ReadDiagnoseInput("oom.txt", "CUDA out of memory. Tried to allocate ...");
//   auto d = Diagnose({*in});  // d->cause == Cause::kFragmentation, d->fixes[0].id ==
//                              // "allocator.expandable-segments"
Result<Diagnosis> Diagnose(const std::vector<DiagnoseInput>& inputs,
                           const DiagnoseOptions& options = {});

}  // namespace memtune::diagnose
