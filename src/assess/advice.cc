// The playbook's allocator advice as data. Quick Decision step 1 of the memory-tuning
// playbook: "close to the memory limit or fragmented: set
// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True first" (no throughput cost); steps 3-4
// when even expandable segments run out: recompute, more pipeline stages, more sharding.
#include "assess/advice.h"

#include <fmt/format.h>

namespace memtune::assess::internal {
namespace {

constexpr const char* kReduceId = "memory.reduce-model-or-activations";

std::string Gb(std::int64_t bytes) {
  return fmt::format("{:.2f}", static_cast<double>(bytes) / 1e9);
}

// JSON text of a string value (the settings strings hold no quote or backslash PyTorch
// accepts, but escape them anyway).
std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The field a user edits to switch the allocator mode: where the job's config came from,
// else the variable every PyTorch release reads.
std::string AllocConfField(const synth::Forecast& f) {
  if (f.alloc_conf_field.rfind("memtune.env.", 0) == 0) return f.alloc_conf_field;
  return "memtune.env.PYTORCH_CUDA_ALLOC_CONF";
}

Advice ExpandableAdvice(const Assessment& a, const ModeVerdict& native,
                        const ModeVerdict& expandable, std::string text) {
  Advice advice;
  advice.id = std::string(kExpandableSegmentsAdvice);
  advice.playbook_step = "Quick Decision step 1";
  advice.changes.push_back({AllocConfField(*a.forecast), JsonString(expandable.alloc_conf)});
  advice.effect_bytes = expandable.margin_bytes - native.margin_bytes;
  advice.text = std::move(text);
  return advice;
}

}  // namespace

std::vector<Advice> DecideAdvice(const Assessment& a) {
  const ModeVerdict* native = FindVerdict(a, AllocatorMode::kNative);
  const ModeVerdict* expandable = FindVerdict(a, AllocatorMode::kExpandable);
  if (native == nullptr || expandable == nullptr || !a.forecast) return {};
  std::vector<Advice> advice;
  const bool native_oom = native->state == VerdictState::kOom;
  const bool expandable_oom = expandable->state == VerdictState::kOom;
  if (native->job_config && !expandable_oom) {
    // Fragmentation (what expandable segments win back) larger than the native spare.
    const bool fragmented = expandable->margin_bytes - native->margin_bytes > native->margin_bytes;
    if (native_oom) {
      advice.push_back(ExpandableAdvice(a, *native, *expandable,
                                        "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
                                        "first: the native allocator runs out of memory "
                                        "from fragmentation while expandable segments fit"));
    } else if (native->state == VerdictState::kAtRisk && expandable->state == VerdictState::kFits) {
      advice.push_back(
          ExpandableAdvice(a, *native, *expandable,
                           fmt::format("set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
                                       "first: the native allocator leaves "
                                       "{} GB spare, within the prediction's {} GB uncertainty, "
                                       "and expandable segments {} GB, "
                                       "at no throughput cost",
                                       Gb(native->margin_bytes), Gb(native->uncertainty_bytes),
                                       Gb(expandable->margin_bytes))));
    } else if (fragmented) {
      advice.push_back(ExpandableAdvice(
          a, *native, *expandable,
          fmt::format("fragmentation costs more than the native allocator leaves free ({} GB "
                      "spare, {} GB with "
                      "expandable segments): set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
                      "first, at no "
                      "throughput cost",
                      Gb(native->margin_bytes), Gb(expandable->margin_bytes))));
    }
  }
  if (native_oom && expandable_oom) {
    Advice reduce;
    reduce.id = kReduceId;
    reduce.playbook_step = "Quick Decision steps 3-4";
    const ModeVerdict& closer =
        expandable->margin_bytes > native->margin_bytes ? *expandable : *native;
    reduce.text = fmt::format(
        "the job does not fit even with expandable segments ({} GB short on pipeline rank {}): add "
        "recompute, "
        "raise PP, or shard more",
        Gb(-closer.margin_bytes), closer.pp_rank);
    advice.push_back(std::move(reduce));
  }
  return advice;
}

}  // namespace memtune::assess::internal
