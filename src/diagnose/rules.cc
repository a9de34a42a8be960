// The order of the cause rules: the first that applies decides (docs/diagnose.md gives each
// rule's reasoning). Numbers beat words; a root cause (a conflict, a leak, another process)
// beats the capacity it exhausts.
#include <map>

#include "diagnose/rules_internal.h"
#include "memtune/alloc/oom_message.h"

namespace memtune::diagnose {
namespace {

using alloc::FormatSize;

Decision Make(Cause cause, Confidence confidence) {
  Decision d;
  d.cause = cause;
  d.confidence = confidence;
  return d;
}

std::optional<Decision> ConfigRule(const Findings& f) {
  if (f.config_errors.empty()) return std::nullopt;
  Decision d = Make(Cause::kConfigConflict, Confidence::kHigh);
  for (const auto& e : f.config_errors) {
    d.evidence.push_back(MakeEvidence("configuration error", std::nullopt, e.source, e.item.line,
                                      e.item.line_text, e.item.id));
    d.notes.push_back(e.item.what + (e.item.ignored ? " (silently ignored)" : ""));
  }
  return d;
}

std::optional<Decision> ExabyteRule(const Findings& f) {
  for (const auto& m : f.ooms) {
    if (m.item.era != OomEra::kExabyte) continue;
    Decision d = Make(Cause::kUnknown, Confidence::kHigh);
    d.evidence.push_back(MakeEvidence("requested", std::nullopt, m.source, m.item.line,
                                      m.item.line_text, "more than 1 EB"));
    d.notes.push_back(
        "a request of more than 1 EB is a corrupted size (an overflowed or "
        "uninitialised shape, often after a failed collective), not memory "
        "pressure: find the operation that computed it");
    return d;
  }
  return std::nullopt;
}

std::optional<Decision> LeakRule(const Findings& f) {
  for (const auto& m : f.loss_accumulation) {
    Decision d = Make(Cause::kLeak, Confidence::kMedium);
    d.evidence.push_back(
        MakeEvidence("loss accumulated as a tensor", std::nullopt, m.source, m.line, m.text));
    d.notes.push_back(
        "adding the loss tensor to a running sum keeps every iteration's "
        "autograd graph alive; accumulate loss.item() or loss.detach()");
    return d;
  }
  for (const auto& log : f.logs) {
    auto g = FindLeak(log.item.samples);
    if (!g) continue;
    const MemorySample& a = log.item.samples[g->first_sample];
    const MemorySample& b = log.item.samples[g->last_sample];
    Decision d = Make(Cause::kLeak, Confidence::kHigh);
    d.evidence.push_back(MakeEvidence("allocated at iteration " + std::to_string(a.iteration),
                                      a.allocated_bytes.value_or(a.peak_bytes()), log.source,
                                      a.line, a.line_text));
    d.evidence.push_back(MakeEvidence("allocated at iteration " + std::to_string(b.iteration),
                                      b.allocated_bytes.value_or(b.peak_bytes()), log.source,
                                      b.line, b.line_text));
    d.notes.push_back("memory grows by " + FormatSize(g->growth_bytes) + " from iteration " +
                      std::to_string(a.iteration) + " to " + std::to_string(b.iteration) +
                      " and never falls: tensors are kept across iterations");
    return d;
  }
  return std::nullopt;
}

std::string RankName(int rank, const LogMemory& log, const std::optional<JobFacts>& job) {
  std::string name = "rank " + std::to_string(rank);
  int pp = log.pipeline_parallel_size.value_or(job ? job->pipeline_parallel_size : 0);
  int world = log.world_size.value_or(job ? job->world_size : 0);
  if (auto stage = PipelineStage(rank, world, pp); stage && pp > 1) {
    name += " (pipeline stage " + std::to_string(*stage) + " of " + std::to_string(pp) + ")";
  }
  return name;
}

std::optional<Decision> LogImbalance(const Findings& f, const std::optional<JobFacts>& job) {
  for (const auto& log : f.logs) {
    auto imb = FindImbalance(log.item.samples);
    if (!imb) continue;
    const MemorySample& s = log.item.samples[imb->sample];
    Decision d = Make(Cause::kImbalance, Confidence::kHigh);
    d.rank = imb->rank;
    const std::string name = RankName(imb->rank, log.item, job);
    d.evidence.push_back(MakeEvidence("peak of the highest rank", imb->peak_bytes, log.source,
                                      s.line, s.line_text, name));
    d.evidence.push_back(MakeEvidence("median peak of " + std::to_string(imb->ranks) + " ranks",
                                      imb->median_bytes, log.source, 0, "computed"));
    d.notes.push_back(name + " peaks at " + FormatSize(imb->peak_bytes) + ", " +
                      FormatSize(imb->peak_bytes - imb->median_bytes) + " above the median of " +
                      std::to_string(imb->ranks) + " ranks");
    return d;
  }
  return std::nullopt;
}

// nvidia-smi: a GPU hosting several processes. When its extra processes also run on other
// GPUs, those are the other ranks holding a context or tensors on it (imbalance: set_device
// missing, torch.load without map_location); when they run nowhere else, another job shares
// the GPU (other_process).
std::optional<Decision> SmiRule(const Findings& f) {
  for (const auto& smi : f.smi) {
    std::map<int, std::vector<const SmiProcess*>> per_gpu;
    for (const SmiProcess& p : smi.item.processes) per_gpu[p.gpu].push_back(&p);
    if (per_gpu.size() < 2) continue;
    for (const auto& [gpu, procs] : per_gpu) {
      if (procs.size() < 2) continue;
      bool ranks_elsewhere = false;
      for (const SmiProcess& other : smi.item.processes) {
        if (other.gpu == gpu) continue;
        for (const SmiProcess* p : procs) ranks_elsewhere |= p->pid == other.pid;
      }
      Decision d =
          Make(ranks_elsewhere ? Cause::kImbalance : Cause::kOtherProcess, Confidence::kMedium);
      d.rank = gpu;
      for (const SmiProcess* p : procs) {
        d.evidence.push_back(MakeEvidence("process on GPU " + std::to_string(gpu), p->bytes,
                                          smi.source, p->line, p->line_text,
                                          "pid " + std::to_string(p->pid)));
      }
      d.notes.push_back("GPU " + std::to_string(gpu) + " hosts " + std::to_string(procs.size()) +
                        (ranks_elsewhere ? " processes, some of them ranks of other GPUs"
                                         : " processes, some of them running on no other GPU"));
      return d;
    }
  }
  return std::nullopt;
}

std::optional<Decision> ProseImbalance(const Findings& f) {
  for (const auto& m : f.cross_rank_device) {
    Decision d = Make(Cause::kImbalance, Confidence::kLow);
    d.rank = 0;
    d.evidence.push_back(
        MakeEvidence("other ranks' processes on one GPU", std::nullopt, m.source, m.line, m.text));
    return d;
  }
  return std::nullopt;
}

std::optional<Decision> PhaseRule(const Findings& f) {
  auto phase = StrongestPhase(f);
  if (!phase || (f.ooms.empty() && f.oom_mentions.empty())) return std::nullopt;
  const Phase p = phase->item.phase;
  Cause cause;
  if (p == Phase::kCheckpoint) {
    cause = Cause::kCheckpointLoad;
  } else if (p == Phase::kEvaluation || p == Phase::kGeneration) {
    cause = Cause::kEvalOrGeneration;
  } else {
    return std::nullopt;
  }
  Decision d = Make(cause, f.ooms.empty() ? Confidence::kLow : Confidence::kMedium);
  d.evidence.push_back(MakeEvidence("phase", std::nullopt, phase->source, phase->item.line,
                                    phase->item.line_text, PhaseName(p)));
  return d;
}

}  // namespace

Evidence MakeEvidence(std::string what, std::optional<std::int64_t> bytes, std::string source,
                      int line, std::string text, std::string value) {
  return Evidence{std::move(what),   bytes, std::move(value),
                  std::move(source), line,  std::move(text)};
}

Decision Decide(const Findings& f, const std::optional<JobFacts>& job) {
  if (auto d = EarlyRules(f, job)) return *d;
  if (auto d = LateRules(f, job)) return *d;
  Decision d = Make(Cause::kUnknown, Confidence::kLow);
  if (auto phase = StrongestPhase(f)) {
    d.evidence.push_back(MakeEvidence("phase", std::nullopt, phase->source, phase->item.line,
                                      phase->item.line_text, PhaseName(phase->item.phase)));
    d.notes.push_back(std::string("the traceback is in the ") + PhaseName(phase->item.phase) +
                      ", but the input holds no out-of-memory message");
  }
  for (const auto& log : f.logs) {
    d.notes.push_back(log.source + ": " + std::to_string(log.item.samples.size()) +
                      " memory lines show no growth across iterations, no rank far above the "
                      "others and no full GPU");
  }
  d.notes.push_back(
      "no out-of-memory numbers to decide on: paste the whole PyTorch message "
      "(\"Tried to allocate ... reserved by PyTorch ...\"), the log's memory lines, "
      "or a memory snapshot (torch.cuda.memory._dump_snapshot)");
  return d;
}

std::optional<Decision> EarlyRules(const Findings& f, const std::optional<JobFacts>& job) {
  if (auto d = ConfigRule(f)) return d;
  if (!f.snapshots.empty()) return SnapshotRule(f.snapshots.front(), job);
  if (auto d = ExabyteRule(f)) return d;
  if (auto d = LeakRule(f)) return d;
  const Sourced<OomText>* best = BestAllocatorMessage(f);
  if (best) {
    if (auto d = MessageRules(*best, f)) {
      AddMessageEvidence(*best, d->evidence);
      return d;
    }
  }
  for (const Mention& m : f.unallocated_mentions) {
    Decision d = Make(Cause::kFragmentation, Confidence::kMedium);
    d.evidence.push_back(
        MakeEvidence("reserved but unallocated", std::nullopt, m.source, m.line, m.text));
    return d;
  }
  if (auto d = LogImbalance(f, job)) return d;
  if (auto d = SmiRule(f)) return d;
  if (auto d = ProseImbalance(f)) return d;
  return PhaseRule(f);
}

}  // namespace memtune::diagnose
