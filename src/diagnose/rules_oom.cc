// Cause rules on the numbers of an OOM message and on snapshot replays (docs/diagnose.md).
#include "diagnose/rules_internal.h"
#include "memtune/alloc/oom_message.h"

namespace memtune::diagnose {
namespace {

using alloc::FormatSize;

Confidence ByNumbers(const OomText& m) {
  return m.number_count() >= 5 ? Confidence::kHigh : Confidence::kMedium;
}

std::int64_t OthersBytes(const OomText& m) {
  std::int64_t sum = 0;
  for (const OtherProcess& p : m.other_processes) sum += p.bytes;
  return sum;
}

std::optional<Decision> FragmentationRule(const Sourced<OomText>& s, const Findings& f) {
  const OomText& m = s.item;
  if (!m.requested_bytes) return std::nullopt;
  Decision d;
  d.confidence = ByNumbers(m);
  if (m.private_pool_bytes && *m.private_pool_bytes >= *m.requested_bytes) {
    d.cause = Cause::kFragmentation;
    d.notes.push_back("private pools (CUDA graphs) hold " + FormatSize(*m.private_pool_bytes) +
                      ", enough for the request, but only their own allocations may use them");
    return d;
  }
  // The native allocator releases every wholly free segment before it gives up, so what is
  // left unallocated sits in holes of live segments; with the device's free bytes it could
  // serve the request if it were one piece (expandable segments map pages where needed).
  if (!m.unallocated_bytes ||
      *m.unallocated_bytes + m.free_bytes.value_or(0) < *m.requested_bytes) {
    return std::nullopt;
  }
  const std::int64_t reserved = m.reserved_bytes.value_or(*m.unallocated_bytes);
  if (static_cast<double>(*m.unallocated_bytes) <
      kNormalSlackFraction * static_cast<double>(reserved)) {
    return std::nullopt;
  }
  if (!f.expandable_set.empty()) return std::nullopt;  // playbook: then it is capacity
  d.cause = Cause::kFragmentation;
  d.notes.push_back("the cache held " + FormatSize(*m.unallocated_bytes) +
                    " reserved but unallocated (with the device's free memory, enough for the " +
                    FormatSize(*m.requested_bytes) + " requested), yet no block could serve it");
  return d;
}

std::optional<Decision> OtherProcessRule(const Sourced<OomText>& s) {
  const OomText& m = s.item;
  const std::int64_t others = OthersBytes(m);
  if (others < kMinOtherProcessBytes || !m.requested_bytes) return std::nullopt;
  if (m.free_bytes && *m.free_bytes + others < *m.requested_bytes) return std::nullopt;
  Decision d;
  d.cause = Cause::kOtherProcess;
  d.confidence = ByNumbers(m);
  d.notes.push_back(std::to_string(m.other_processes.size()) + " other process(es) hold " +
                    FormatSize(others) + " on this GPU; without them the " +
                    FormatSize(*m.requested_bytes) + " request would have fit");
  return d;
}

std::optional<Decision> NonPytorchRule(const Sourced<OomText>& s) {
  const OomText& m = s.item;
  if (!m.process_bytes || !m.reserved_bytes) return std::nullopt;
  const std::int64_t outside = *m.process_bytes - *m.reserved_bytes;
  const double share = kLargeNonPytorchFraction * static_cast<double>(m.total_bytes.value_or(0));
  if (outside < kLargeNonPytorchBytes || static_cast<double>(outside) < share) return std::nullopt;
  Decision d;
  d.cause = Cause::kNonPytorch;
  d.confidence = ByNumbers(m);
  d.evidence.push_back(MakeEvidence("in use outside PyTorch (process - reserved)", outside,
                                    s.source, m.line, m.line_text));
  d.notes.push_back(FormatSize(outside) +
                    " of this process is outside PyTorch's allocator: CUDA context, NCCL "
                    "communicators and buffers, cuBLAS workspaces, NCCL/TE userbuffers");
  return d;
}

bool IsModelStatePhase(Phase p) {
  return p == Phase::kSetup || p == Phase::kOptimizerStep || p == Phase::kCheckpoint ||
         p == Phase::kParameterGather;
}

}  // namespace

const Sourced<OomText>* BestAllocatorMessage(const Findings& f) {
  const Sourced<OomText>* best = nullptr;
  for (const auto& m : f.ooms) {
    if (m.item.source != OomSource::kCachingAllocator) continue;
    if (!best || m.item.number_count() >= best->item.number_count()) best = &m;
  }
  return best;
}

void AddMessageEvidence(const Sourced<OomText>& s, std::vector<Evidence>& out) {
  const OomText& m = s.item;
  const std::pair<const char*, const std::optional<std::int64_t>*> rows[] = {
      {"requested", &m.requested_bytes},
      {"total capacity", &m.total_bytes},
      {"free", &m.free_bytes},
      {"in use by this process", &m.process_bytes},
      {"allocated by PyTorch", &m.allocated_bytes},
      {"reserved by PyTorch", &m.reserved_bytes},
      {"reserved but unallocated", &m.unallocated_bytes},
      {"in private pools", &m.private_pool_bytes},
      {"allowed", &m.allowed_bytes},
      {"failed allocation", &m.failed_bytes},
  };
  for (const auto& [what, value] : rows) {
    if (*value) out.push_back(MakeEvidence(what, **value, s.source, m.line, m.line_text));
  }
  for (const auto& p : m.other_processes) {
    out.push_back(MakeEvidence("other process", p.bytes, s.source, m.line, m.line_text,
                               "pid " + std::to_string(p.pid)));
  }
}

std::optional<Decision> MessageRules(const Sourced<OomText>& m, const Findings& f) {
  if (auto d = FragmentationRule(m, f)) return d;
  if (auto d = OtherProcessRule(m)) return d;
  return NonPytorchRule(m);
}

Cause CapacitySplit(const Findings& f, const std::optional<JobFacts>& job, const OomText* m,
                    const std::optional<PhaseEvidence>& phase, Decision& d) {
  if (job && job->model_state_bytes + job->activation_bytes > 0) {
    d.notes.push_back("the job's estimate: model state " + FormatSize(job->model_state_bytes) +
                      ", activations and workspace " + FormatSize(job->activation_bytes));
    return job->model_state_bytes >= job->activation_bytes ? Cause::kCapacityModelState
                                                           : Cause::kCapacityActivations;
  }
  if (phase) {
    d.notes.push_back(std::string("the OOM happened in the ") + PhaseName(phase->phase) + " (\"" +
                      phase->token + "\")");
    return IsModelStatePhase(phase->phase) ? Cause::kCapacityModelState
                                           : Cause::kCapacityActivations;
  }
  for (const auto& log : f.logs) {
    for (const MemorySample& s : log.item.samples) {
      if (!s.allocated_bytes || !s.max_allocated_bytes) continue;
      const std::int64_t transient = *s.max_allocated_bytes - *s.allocated_bytes;
      d.notes.push_back("the log's step peak is " + FormatSize(transient) +
                        " above what stays allocated between steps (" +
                        FormatSize(*s.allocated_bytes) + ", the model state)");
      return transient > *s.allocated_bytes ? Cause::kCapacityActivations
                                            : Cause::kCapacityModelState;
    }
  }
  if (m && m->requested_bytes && m->total_bytes && *m->requested_bytes > *m->total_bytes) {
    d.notes.push_back("one request is larger than the whole GPU: an activation-sized tensor");
    return Cause::kCapacityActivations;
  }
  d.notes.push_back(
      "nothing tells model state from activations (no traceback, no job); "
      "activations are the part that changes with batch and sequence");
  d.confidence = Confidence::kLow;
  return Cause::kCapacityActivations;
}

Decision SnapshotRule(const SnapshotFinding& s, const std::optional<JobFacts>& job) {
  Decision d;
  d.confidence = Confidence::kHigh;
  d.evidence.push_back(MakeEvidence("requested", s.request_bytes, s.source, 0, "snapshot OOM"));
  d.evidence.push_back(MakeEvidence("free", s.device_free_bytes, s.source, 0, "snapshot OOM"));
  d.evidence.push_back(
      MakeEvidence("reserved by PyTorch", s.reserved_bytes, s.source, 0, "snapshot OOM"));
  if (s.unallocated_bytes >= 0) {
    d.evidence.push_back(MakeEvidence("reserved but unallocated", s.unallocated_bytes, s.source, 0,
                                      "replay under the recorded settings"));
  }
  d.evidence.push_back(MakeEvidence(
      "peak reserved with expandable_segments:True", s.expandable_peak_reserved_bytes, s.source, 0,
      "replay under expandable_segments:True", s.expandable_oom ? "oom" : "fits"));
  if (!s.recorded_expandable && !s.expandable_oom) {
    d.cause = Cause::kFragmentation;
    d.notes.push_back("replayed under expandable_segments:True on the same " +
                      FormatSize(s.capacity_bytes) + " the requests fit (peak reserved " +
                      FormatSize(s.expandable_peak_reserved_bytes) + ")");
    return d;
  }
  d.notes.push_back(s.recorded_expandable
                        ? "recorded with expandable_segments:True already: a capacity limit"
                        : "replayed under expandable_segments:True the requests still do not fit");
  Findings none;
  d.cause = CapacitySplit(none, job, nullptr, s.phase, d);
  return d;
}

std::optional<Sourced<PhaseEvidence>> StrongestPhase(const Findings& f) {
  std::optional<Sourced<PhaseEvidence>> best;
  for (const auto& p : f.phases) {
    if (!best || PhaseSpecificity(p.item.phase) > PhaseSpecificity(best->item.phase)) best = p;
  }
  return best;
}

}  // namespace memtune::diagnose
