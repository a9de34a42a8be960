// EstimateMemory: dispatch on the mode; mode names.
#include "memtune/estimate/estimate.h"

#include <algorithm>
#include <optional>
#include <string>

#include "accurate.h"
#include "memtune/estimate/compat.h"
#include "memtune/model/checks.h"
#include "memtune/model/parameters.h"

namespace memtune::estimate {

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kAccurate:
      return "accurate";
    case Mode::kMegatronLm:
      return "megatron-lm";
    case Mode::kBridge:
      return "bridge";
  }
  return "accurate";
}

Result<Mode> ParseMode(std::string_view name, std::string_view field) {
  for (Mode mode : {Mode::kAccurate, Mode::kMegatronLm, Mode::kBridge}) {
    if (name == ModeName(mode)) return mode;
  }
  return InvalidInput(std::string(field), "unknown mode '" + std::string(name) +
                                              "'; allowed: accurate, megatron-lm, bridge");
}

namespace {

// A job whose layout does not divide has no memory figure: refuse it with the first
// structural violation (model::BlocksEstimate), naming its field, value and fix.
std::optional<Error> RefuseInconsistentJob(const model::Job& job) {
  const std::vector<model::Finding> errors = model::StructuralErrors(job);
  if (errors.empty()) return std::nullopt;
  const model::Finding& first = errors.front();
  std::string field = first.fields.empty() ? std::string() : first.fields.front().first;
  std::string message = first.message + " [" + first.rule_id + "]";
  if (errors.size() > 1) {
    message +=
        " (and " + std::to_string(errors.size() - 1) + " more; `memtune check` lists them all)";
  }
  return InvalidConfig(std::move(field), std::move(message), first.fix);
}

// memtune counts bytes in int64. A generous upper bound of a rank's bytes, in double,
// keeps every sum below 2^61 (2.3 EB, a million times any GPU): beyond it the job is
// refused rather than estimated with a wrapped-around number.
std::optional<Error> RefuseOversizedJob(const model::Job& job) {
  const auto& m = job.model;
  const double h = static_cast<double>(m.hidden_size);
  const double q = static_cast<double>(m.num_attention_heads) *
                   static_cast<double>(model::EffectiveKvChannels(m));
  const double ffn = static_cast<double>(model::EffectiveFfnHiddenSize(m)) *
                     static_cast<double>(std::max<std::int64_t>(1, m.num_moe_experts.value_or(1)));
  const double vocab = static_cast<double>(model::PaddedVocabSize(job));
  const double layers = static_cast<double>(m.num_layers) + 2;
  const double params = layers * (h * (3 * q + 2 * h) + 3 * h * ffn) + 2 * vocab * h;
  const double tokens =
      static_cast<double>(job.train.micro_batch_size) * static_cast<double>(m.seq_length);
  const double width =
      16 * h + 8 * q +
      16 * ffn * static_cast<double>(std::max<std::int64_t>(1, m.moe_router_topk)) + 12 * vocab;
  // A rank holds at most a few layers' worth of in-flight micro-batches per layer of the
  // model (1F1B: L/PP layers x PP micro-batches; interleaved: under 3L).
  const double bound = 24 * params + 4 * tokens * width * layers;
  if (bound < 2305843009213693952.0) return std::nullopt;  // 2^61
  return InvalidConfig(
      "train.micro_batch_size",
      "the job's sizes (micro_batch_size x seq_length x widths x layers) put a rank's memory "
      "beyond 2^61 bytes (2.3 EB); memtune refuses sizes this far beyond any GPU",
      "check model sizes, seq_length and micro_batch_size");
}

}  // namespace

Result<Estimate> EstimateMemory(const model::Job& job, const EstimateOptions& options) {
  if (auto refusal = RefuseInconsistentJob(job)) return *refusal;
  if (auto refusal = RefuseOversizedJob(job)) return *refusal;
  if (options.mode == Mode::kAccurate) return internal::EstimateAccurate(job, options);
  if (job.memtune.framework == model::Framework::kFsdp2) {  // upstream's formulas know no FSDP2
    return Unsupported(
        "memtune.framework",
        std::string(ModeName(options.mode)) +
            " mode reproduces a Megatron estimator, which does not model torchtitan FSDP2 jobs; "
            "use --mode accurate");
  }
  MEMTUNE_TRY(auto estimate, options.mode == Mode::kBridge ? EstimateBridge(job, options)
                                                           : EstimateMegatronLm(job, options));
  MEMTUNE_RETURN_IF_ERROR(internal::FillGpuFacts(job, estimate));  // for the fits verdict
  return estimate;
}

}  // namespace memtune::estimate
