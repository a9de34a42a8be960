// The later cause rules: OOMs outside PyTorch's allocator, memory held by another engine,
// capacity from numbers or logs, and what words alone can say (docs/diagnose.md).
#include <algorithm>
#include <map>
#include <set>

#include "diagnose/rules_internal.h"
#include "memtune/alloc/oom_message.h"

namespace memtune::diagnose {
namespace {

using alloc::FormatSize;

// Plain prints that grow from line to line within a step show activations accumulating.
inline constexpr double kStepGrowthFraction = 0.05;

std::optional<Decision> LibraryOomRule(const Findings& f) {
  Decision d;
  d.cause = Cause::kNonPytorch;
  d.confidence = Confidence::kMedium;
  for (const auto& m : f.ooms) {
    if (m.item.source == OomSource::kCachingAllocator) continue;
    const char* who = m.item.source == OomSource::kNccl     ? "NCCL allocation failed"
                      : m.item.source == OomSource::kCublas ? "cuBLAS allocation failed"
                                                            : "CUDA runtime allocation failed";
    d.evidence.push_back(
        MakeEvidence(who, m.item.failed_bytes, m.source, m.item.line, m.item.line_text));
  }
  if (d.evidence.empty()) return std::nullopt;
  d.notes.push_back(
      "a library outside PyTorch's allocator (NCCL, cuBLAS, the CUDA runtime) "
      "could not get device memory: PyTorch's cache or other memory outside it "
      "left no room for communicator buffers and workspaces");
  return d;
}

std::optional<Decision> OtherEngineRule(const Findings& f) {
  for (const auto& log : f.logs) {
    if (log.item.held_by_other_engine.empty()) continue;
    Decision d;
    d.cause = Cause::kOtherProcess;
    d.confidence = Confidence::kMedium;
    for (const HeldMemory& h : log.item.held_by_other_engine) {
      d.evidence.push_back(MakeEvidence("held by the colocated inference engine", h.bytes,
                                        log.source, h.line, h.line_text));
    }
    d.notes.push_back(
        "a colocated engine (vLLM sleep mode) keeps memory that training cannot "
        "use; when it grows from step to step training runs out");
    return d;
  }
  return std::nullopt;
}

std::optional<Decision> LogCapacity(const Findings& f, const std::optional<JobFacts>& job) {
  for (const auto& log : f.logs) {
    for (const MemorySample& s : log.item.samples) {
      double share = s.capacity_percent ? *s.capacity_percent / 100.0 : 0.0;
      if (!s.capacity_percent && job && job->capacity_bytes > 0) {
        share = static_cast<double>(s.peak_bytes()) / static_cast<double>(job->capacity_bytes);
      }
      if (share < kNearCapacityFraction) continue;
      Decision d;
      d.confidence = Confidence::kMedium;
      d.evidence.push_back(MakeEvidence("peak memory", s.peak_bytes(), log.source, s.line,
                                        s.line_text,
                                        std::to_string(static_cast<int>(share * 100)) + "%"));
      d.cause = CapacitySplit(f, job, nullptr, std::nullopt, d);
      return d;
    }
  }
  return std::nullopt;
}

std::optional<Decision> StepGrowthRule(const Findings& f) {
  for (const auto& log : f.logs) {
    const MemorySample* first = nullptr;
    const MemorySample* last = nullptr;
    for (const MemorySample& s : log.item.samples) {
      if (s.format != LogFormat::kPlain) continue;
      if (!first) first = &s;
      last = &s;
    }
    if (!first || first == last) continue;
    const std::int64_t a = *first->allocated_bytes, b = *last->allocated_bytes;
    if (static_cast<double>(b - a) < kStepGrowthFraction * static_cast<double>(a)) continue;
    Decision d;
    d.cause = Cause::kCapacityActivations;
    d.confidence = Confidence::kLow;
    d.evidence.push_back(MakeEvidence("allocated", a, log.source, first->line, first->line_text));
    d.evidence.push_back(MakeEvidence("allocated", b, log.source, last->line, last->line_text));
    d.notes.push_back("allocated memory grows by " + FormatSize(b - a) +
                      " from print to print inside the step and is not freed: activations "
                      "kept for backward");
    return d;
  }
  return std::nullopt;
}

// The playbook's "OOM on a single rank despite headroom on others": the ranks' loads are
// alike (the imbalance rule did not fire) and every other rank's last peak plus the request
// fits the GPU, so the failing rank lost to its cache's layout, not to the job's size.
std::optional<Decision> SingleRankRule(const Findings& f) {
  std::set<int> ranks;
  const Sourced<OomText>* message = nullptr;
  for (const auto& m : f.ooms) {
    if (m.item.source != OomSource::kCachingAllocator || !m.item.rank) continue;
    ranks.insert(*m.item.rank);
    message = &m;
  }
  if (ranks.size() != 1 || !message->item.requested_bytes || !message->item.total_bytes) {
    return std::nullopt;
  }
  const int oom_rank = *ranks.begin();
  std::map<int, std::int64_t> peer_peaks;
  for (const auto& log : f.logs) {
    for (const MemorySample& s : log.item.samples) {
      if (s.rank >= 0 && s.rank != oom_rank && s.peak_bytes() > 0)
        peer_peaks[s.rank] = s.peak_bytes();
    }
  }
  if (peer_peaks.empty()) return std::nullopt;
  std::int64_t highest = 0;
  for (const auto& [rank, peak] : peer_peaks) highest = std::max(highest, peak);
  if (highest + *message->item.requested_bytes > *message->item.total_bytes) return std::nullopt;
  Decision d;
  d.cause = Cause::kFragmentation;
  d.confidence = Confidence::kMedium;
  AddMessageEvidence(*message, d.evidence);
  d.evidence.push_back(
      MakeEvidence("highest peak of the other " + std::to_string(peer_peaks.size()) + " ranks",
                   highest, message->source, 0, "computed from the log"));
  d.notes.push_back("only rank " + std::to_string(oom_rank) +
                    " ran out; the other ranks, with "
                    "the same load, peaked at most at " +
                    FormatSize(highest) + " and had room for the request");
  return d;
}

// With a job whose forecast fails (or is at risk) under the native allocator and fits with
// expandable segments, an OOM without expandable segments set is the playbook's headline
// case: fragmentation, not capacity.
std::optional<Decision> ForecastRule(const Findings& f, const std::optional<JobFacts>& job) {
  if (!job || !job->only_expandable_fits || !f.expandable_set.empty()) return std::nullopt;
  const Sourced<OomText>* best = BestAllocatorMessage(f);
  if (!best && f.oom_mentions.empty()) return std::nullopt;
  Decision d;
  d.cause = Cause::kFragmentation;
  d.confidence = Confidence::kMedium;
  if (best) AddMessageEvidence(*best, d.evidence);
  d.notes.push_back("memtune's forecast for the job (" + job->verdicts +
                    "): the same job fits once segments can grow");
  return d;
}

// Capacity from an allocator message with numbers.
Decision MessageCapacity(const Findings& f, const std::optional<JobFacts>& job,
                         const Sourced<OomText>& best, const std::optional<PhaseEvidence>& p) {
  Decision d;
  d.confidence = best.item.number_count() >= 5 ? Confidence::kHigh : Confidence::kMedium;
  AddMessageEvidence(best, d.evidence);
  if (!f.expandable_set.empty()) {
    d.notes.push_back("expandable_segments:True is already set (" + f.expandable_set[0].source +
                      " line " + std::to_string(f.expandable_set[0].line) +
                      "): a genuine capacity limit");
  }
  if (best.item.allowed_bytes) {
    d.notes.push_back("a memory fraction caps this process at " +
                      FormatSize(*best.item.allowed_bytes) +
                      " (torch.cuda.set_per_process_memory_fraction): the limit is that cap, "
                      "not the GPU");
  }
  d.cause = CapacitySplit(f, job, &best.item, p, d);
  return d;
}

// An OOM named in words only.
Decision WordsOnly(const Findings& f, const std::optional<JobFacts>& job, const OomText* message,
                   const std::optional<PhaseEvidence>& p) {
  Decision d;
  d.confidence = Confidence::kLow;
  if (!f.oom_mentions.empty()) {
    const Mention& m = f.oom_mentions.front();
    d.evidence.push_back(MakeEvidence("out of memory", std::nullopt, m.source, m.line, m.text));
  }
  if (!f.cuda_graph_mentions.empty() && (!p || p->phase != Phase::kSetup)) {
    d.cause = Cause::kFragmentation;
    d.notes.push_back(
        "CUDA graphs keep their memory in private pools that no other allocation "
        "can use; with no numbers, that split cache is the likely cause");
    return d;
  }
  d.notes.push_back(
      "the input names an OOM but gives no numbers: this is the usual cause, "
      "not a measurement");
  d.cause = CapacitySplit(f, job, message, p, d);
  d.confidence = Confidence::kLow;
  return d;
}

std::optional<Decision> CapacityRule(const Findings& f, const std::optional<JobFacts>& job) {
  const Sourced<OomText>* best = BestAllocatorMessage(f);
  auto phase = StrongestPhase(f);
  const std::optional<PhaseEvidence> p =
      phase ? std::optional<PhaseEvidence>(phase->item) : std::nullopt;
  if (best && best->item.number_count() >= 2) return MessageCapacity(f, job, *best, p);
  if (auto d = LogCapacity(f, job)) return d;
  if (auto d = StepGrowthRule(f)) return d;
  if (f.oom_mentions.empty() && !best) return std::nullopt;
  return WordsOnly(f, job, best ? &best->item : nullptr, p);
}

}  // namespace

std::optional<Decision> LateRules(const Findings& f, const std::optional<JobFacts>& job) {
  const Sourced<OomText>* best = BestAllocatorMessage(f);
  if (!best || best->item.number_count() < 2) {
    if (auto d = LibraryOomRule(f)) return d;
  }
  if (auto d = OtherEngineRule(f)) return d;
  if (auto d = SingleRankRule(f)) return d;
  if (auto d = ForecastRule(f, job)) return d;
  return CapacityRule(f, job);
}

}  // namespace memtune::diagnose
