// The job as declared (JobSpec) and its resolution into the effective job (ResolveJob).
//
// A JobSpec is what the user wrote: the same sections and fields as a Job, except that the
// fields whose effective value depends on other fields are std::optional (unset = derive)
// and the mixed-precision preset is kept as a config, not yet copied onto model, optimizer
// and ddp. ResolveJob applies the rules that depend on other fields (Bridge's
// mixed-precision setup, MCore's derived defaults, Bridge's sync rules), so a caller that
// edits a layout field of a spec and resolves it gets what a document with that field
// would have given, without a YAML round trip. See docs/job.md §6.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "memtune/core/result.h"
#include "memtune/model/job.h"

namespace memtune::model {

// model: ModelBase plus the derived fields, unset = derived by ResolveJob.
struct ModelSpec : ModelBase {
  std::optional<std::int64_t> ffn_hidden_size;          // unset: 4 * hidden_size
  std::optional<std::int64_t> num_query_groups;         // unset: num_attention_heads
  std::optional<std::int64_t> kv_channels;              // unset: hidden_size / heads
  std::optional<std::int64_t> max_position_embeddings;  // unset: seq_length
  // Unset: params_dtype. Ignored when a mixed-precision config is set (it decides).
  std::optional<Dtype> pipeline_dtype;
  // Unset: 512 for multi_latent_attention (MCore MLATransformerConfig), else none; set to
  // std::optional<std::int64_t>() for an explicit none (no query compression).
  std::optional<std::optional<std::int64_t>> q_lora_rank;
  // ModelBase's optionals expert_tensor_parallel_size (unset: TP),
  // microbatch_group_size_per_vp_stage (unset: PP) and, for MoE, moe_ffn_hidden_size (unset:
  // ffn_hidden_size) are derived the same way; in the resolved Job they are set.

  bool operator==(const ModelSpec&) const = default;
};

// train: the declared micro-batch and, unset = derived, the global batch.
struct TrainSpec : TrainBase {
  std::optional<std::int64_t> global_batch_size;  // unset: micro_batch_size * DP size

  bool operator==(const TrainSpec&) const = default;
};

// memtune: hardware and launch environment, with the world size unset = derived.
struct MemtuneSpec : MemtuneBase {
  std::optional<int> world_size;  // GPUs; unset: tp * pp * cp (data-parallel size 1)

  bool operator==(const MemtuneSpec&) const = default;
};

// Bridge's MixedPrecisionConfig fields that change memory, with Bridge's defaults
// (Megatron-Bridge 067f987d training/mixed_precision.py).
struct MixedPrecisionConfig {
  bool fp16 = false;
  bool bf16 = false;
  std::optional<Dtype> params_dtype;    // unset: torch's default dtype, fp32
  std::optional<Dtype> pipeline_dtype;  // unset: params_dtype
  bool grad_reduce_in_fp32 = true;
  Fp8Format fp8 = Fp8Format::kNone;
  Fp8Recipe fp8_recipe = Fp8Recipe::kTensorwise;
  bool first_last_layers_bf16 = false;
  std::optional<bool> fp8_param;  // unset: fp8_param_gather (finalize())
  bool fp8_param_gather = false;
  Fp4Format fp4 = Fp4Format::kNone;
  std::optional<bool> fp4_param;  // unset: fp4_param_gather
  bool fp4_param_gather = false;
  int num_layers_at_start_in_bf16 = 0;
  int num_layers_at_end_in_bf16 = 0;
  bool reuse_grad_buf_for_mxfp8_param_ag = false;

  bool operator==(const MixedPrecisionConfig&) const = default;
};

// The `mixed_precision` section as declared: a preset (possibly with fields changed) or a
// mapping.
struct MixedPrecisionSpec {
  std::string name;  // Job::mixed_precision: the preset's name, or "custom" for a mapping
  MixedPrecisionConfig config;
  std::string base_preset;  // a mapping's `preset:` it starts from ("" = none)

  bool operator==(const MixedPrecisionSpec&) const = default;
};

// A whole job as declared. Every field that is not optional above holds the declared value
// or its Megatron-Core / Bridge default, as in Job.
struct JobSpec {
  ModelSpec model;
  TrainSpec train;
  OptimizerConfig optimizer;
  DdpConfig ddp;
  std::optional<PeftConfig> peft;                     // absent = full training
  std::optional<MixedPrecisionSpec> mixed_precision;  // absent = none (Bridge's default)
  MemtuneSpec memtune;

  bool operator==(const JobSpec&) const = default;
};

// The effective job of `spec`, by the rules of docs/job.md §2-3, in Bridge's order:
//   1. a mixed-precision config is copied onto model, optimizer and ddp (setup());
//   2. unset derived fields take their defaults (ffn_hidden_size = 4 * hidden_size, ETP = TP,
//      world_size = TP * PP * CP, global_batch_size = MBS * DP, ...);
//   3. the sync rules: fp8_param / fp8_param_gather (without a preset), Megatron-FSDP turns
//      the distributed optimizer on, the distributed optimizer on in both ddp and optimizer.
// Errors (the parser's text for the same value, so a document and an edited spec fail
// alike): kInvalidConfig "model.num_layers is required" for an architecture size left at 0
// (num_layers, hidden_size, num_attention_heads, vocab_size); kInvalidConfig
// "<path> = <v> is out of range" (hint "allowed: 1 to 100,000") for a parallel size, batch
// size, world size or layer count outside the document's range.
// It does not check cross-field consistency (TP divides heads, ...): see model/checks.h.
// Pure and cheap (copies the spec, no YAML); thread-safe.
//
// Example:
//   JobSpec spec = ParseJobText(text)->spec;
//   spec.model.tensor_model_parallel_size = 8;
//   spec.model.expert_tensor_parallel_size.reset();  // follow TP again
//   spec.train.global_batch_size.reset();            // MBS * DP
//   Result<Job> job = ResolveJob(spec);
Result<Job> ResolveJob(const JobSpec& spec);

// The mixed-precision preset `name` (Bridge's MIXED_PRECISION_RECIPES; hyphens are accepted
// for underscores), for setting JobSpec::mixed_precision in code.
// Errors: kNotFound "mixed_precision = '<name>' is not a Bridge mixed-precision preset",
// with a did-you-mean and the allowed names in the hint.
//
// Example:
//   spec.mixed_precision = MixedPrecisionPreset("bf16_mixed").value();
Result<MixedPrecisionSpec> MixedPrecisionPreset(std::string_view name);

}  // namespace memtune::model
