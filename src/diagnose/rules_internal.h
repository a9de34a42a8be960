// The cause rules shared between rules.cc (the order) and rules_oom.cc (the OOM-message and
// snapshot rules). Each rule returns a Decision when it applies. Private to diagnose.
#pragma once

#include <optional>

#include "diagnose/findings.h"

namespace memtune::diagnose {

// Reserved-but-unallocated bytes up to this share of reserved are the cache's normal slack
// (block rounding, 2 MiB small-pool and 20 MiB mid-size segments, split remainders): not a
// sign of fragmentation. PyTorch's hint says "if reserved but unallocated memory is large".
inline constexpr double kNormalSlackFraction = 0.10;
// Other processes must hold at least this much to be the cause.
inline constexpr std::int64_t kMinOtherProcessBytes = 256LL << 20;  // bytes
// Memory outside PyTorch above max(this, kLargeNonPytorchFraction x capacity) is more than a
// CUDA context plus the usual NCCL buffers (docs/non-pytorch.md).
inline constexpr std::int64_t kLargeNonPytorchBytes = 4LL << 30;  // bytes
inline constexpr double kLargeNonPytorchFraction = 0.10;
// A log whose peak reaches this share of the capacity has run out of room.
inline constexpr double kNearCapacityFraction = 0.90;

// The rules before the capacity rules (rules.cc): conflicts, snapshots, corrupted sizes,
// leaks, the message's numbers, imbalance, checkpoint and evaluation phases.
std::optional<Decision> EarlyRules(const Findings& f, const std::optional<JobFacts>& job);
// The rest (rules_late.cc): library OOMs, other engines, capacity, words only.
std::optional<Decision> LateRules(const Findings& f, const std::optional<JobFacts>& job);

// The allocator message with the most numbers (the last of equals), or nullptr.
const Sourced<OomText>* BestAllocatorMessage(const Findings& f);

// The evidence rows of an OOM message's numbers.
void AddMessageEvidence(const Sourced<OomText>& m, std::vector<Evidence>& out);

// fragmentation, other_process or non_pytorch from the message's numbers.
std::optional<Decision> MessageRules(const Sourced<OomText>& m, const Findings& f);

// The snapshot rule: fragmentation when the expandable replay fits, capacity when not.
Decision SnapshotRule(const SnapshotFinding& s, const std::optional<JobFacts>& job);

// capacity_model_state or capacity_activations: the job's split, else the phase, else the
// log's split, else a request larger than the GPU, else activations. Adds the evidence used.
Cause CapacitySplit(const Findings& f, const std::optional<JobFacts>& job, const OomText* m,
                    const std::optional<PhaseEvidence>& phase, Decision& d);

// The most specific phase of all text inputs.
std::optional<Sourced<PhaseEvidence>> StrongestPhase(const Findings& f);

}  // namespace memtune::diagnose
