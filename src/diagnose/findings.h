// What the readers found in all inputs, with the input each came from: the facts the cause
// rules (rules.cc) decide on. Private to diagnose.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "memtune/core/result.h"
#include "memtune/diagnose/config_errors.h"
#include "memtune/diagnose/diagnose.h"
#include "memtune/diagnose/log_lines.h"
#include "memtune/diagnose/nvidia_smi.h"
#include "memtune/diagnose/oom_text.h"
#include "memtune/diagnose/traceback.h"

namespace memtune::diagnose {

template <typename T>
struct Sourced {
  std::string source;
  T item;
};

// A line of text that backs a rule by its words (no numbers).
struct Mention {
  std::string source;
  int line = 0;
  std::string text;
};

// The OOM of a snapshot and what replays say about it.
struct SnapshotFinding {
  std::string source;
  int device = 0;
  std::int64_t request_bytes = 0;  // the failing request (rounded)
  std::int64_t device_free_bytes = 0;
  std::int64_t reserved_bytes = 0;  // reserved at the OOM
  std::int64_t unallocated_bytes = -1;
  std::int64_t capacity_bytes = 0;   // calibrated from the OOM
  bool recorded_expandable = false;  // recorded under expandable_segments:True
  bool expandable_oom = true;        // the replay under expandable_segments:True OOMs too
  std::int64_t expandable_peak_reserved_bytes = 0;
  std::optional<PhaseEvidence> phase;  // from the failing request's stack frames
};

struct Findings {
  std::vector<Sourced<OomText>> ooms;
  std::vector<Sourced<ConfigError>> config_errors;
  std::vector<Sourced<PhaseEvidence>> phases;  // one per text input at most
  std::vector<Sourced<LogMemory>> logs;        // inputs with memory lines
  std::vector<Sourced<SmiReport>> smi;
  std::vector<SnapshotFinding> snapshots;
  std::vector<std::string> snapshots_without_oom;  // their names
  std::vector<Mention> loss_accumulation;          // "total += loss": the graph kept across steps
  std::vector<Mention> cuda_graph_mentions;
  std::vector<Mention> expandable_set;        // "expandable_segments:True" in the text
  std::vector<Mention> unallocated_mentions;  // "~20 GiB reserved-but-unallocated" in prose
  std::vector<Mention> oom_mentions;          // the first line mentioning an OOM, per input
  std::vector<Mention> cross_rank_device;     // other ranks' processes on one GPU, in prose
};

// Reads one text input into `out`.
void ReadText(const std::string& source, const std::string& text, Findings& out);

// Replays a snapshot with an OOM under its own settings and under expandable_segments:True.
// Errors: kInvalidInput naming `source` when the snapshot has no trace; the replay's.
Status ReadSnapshot(const std::string& source, const snapshot::Snapshot& snap,
                    alloc::TorchVersion version, Findings& out);

// True when the findings hold anything a rule can use.
bool HasAnything(const Findings& f);

// What the job (--job) says, for the rules: its peak stage's split and the layout.
struct JobFacts {
  std::int64_t model_state_bytes = 0;
  std::int64_t activation_bytes = 0;  // activations + transient workspace at the peak
  std::int64_t capacity_bytes = 0;    // 0 = unknown GPU
  int pipeline_parallel_size = 1;
  int world_size = 0;
  // The forecast: the native allocator OOMs or is at risk, expandable segments fit.
  bool only_expandable_fits = false;
  std::string verdicts;  // "native: at_risk, expandable: fits", for the notes
};

// The cause, confidence, evidence and notes (rules.cc). `job` splits capacity causes.
struct Decision {
  Cause cause = Cause::kUnknown;
  Confidence confidence = Confidence::kLow;
  std::vector<Evidence> evidence;
  std::vector<std::string> notes;
  std::optional<int> rank;  // imbalance: the rank far above the others
};
Decision Decide(const Findings& f, const std::optional<JobFacts>& job);

// The playbook's fixes for `d` in its order (fixes.cc).
std::vector<Fix> FixesFor(const Decision& d, const Findings& f, const model::Job* job);

// An Evidence row.
Evidence MakeEvidence(std::string what, std::optional<std::int64_t> bytes, std::string source,
                      int line, std::string text, std::string value = {});

}  // namespace memtune::diagnose
