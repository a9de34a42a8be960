// ResolveJob: the declared job (JobSpec) -> the effective job (Job). The rules that depend
// on other fields, in Bridge's order: mixed-precision setup, MCore's derived defaults, the
// sync rules. The parser (job_parse.cc) ends here too, so a document and an edited spec
// resolve alike.
#include <algorithm>
#include <array>

#include "model/job_parse_internal.h"

namespace memtune::model {
namespace internal {
namespace {

// MLATransformerConfig.q_lora_rank (MCore 2a75ac12 transformer_config.py).
constexpr std::int64_t kMlaDefaultQLoraRank = 512;

// One range the document's field table enforces (job_schema*.cc), for a spec edited in code.
struct RangeCheck {
  const char* path;
  std::optional<std::int64_t> value;  // unset: nothing to check
  std::int64_t lo;
  std::int64_t hi;
};

template <typename T>
std::optional<std::int64_t> Widen(const std::optional<T>& v) {
  return v ? std::optional<std::int64_t>(*v) : std::nullopt;
}

// An architecture size of 0 is "not given": RequireArchitecture names it.
std::optional<std::int64_t> Given(std::int64_t v) {
  return v == 0 ? std::nullopt : std::optional<std::int64_t>(v);
}

// The sizes a planner edits, in the order the parser reads them (so the first error is the
// same as the document's).
Status CheckRanges(const JobSpec& spec) {
  const ModelSpec& m = spec.model;
  const std::optional<std::int64_t> q_lora = m.q_lora_rank ? Widen(*m.q_lora_rank) : std::nullopt;
  const std::array<RangeCheck, 23> kChecks = {{
      {"model.num_layers", Given(m.num_layers), 1, kMaxLayers},
      {"model.hidden_size", Given(m.hidden_size), 1, kMaxDim},
      {"model.ffn_hidden_size", m.ffn_hidden_size, 1, kMaxDim},
      {"model.num_attention_heads", Given(m.num_attention_heads), 1, kMaxHeads},
      {"model.num_query_groups", m.num_query_groups, 1, kMaxHeads},
      {"model.kv_channels", m.kv_channels, 1, kMaxDim},
      {"model.vocab_size", Given(m.vocab_size), 1, kMaxVocab},
      {"model.max_position_embeddings", m.max_position_embeddings, 1, kMaxSeqTokens},
      {"model.q_lora_rank", q_lora, 1, kMaxDim},
      {"model.tensor_model_parallel_size", m.tensor_model_parallel_size, 1, kMaxParallel},
      {"model.pipeline_model_parallel_size", m.pipeline_model_parallel_size, 1, kMaxParallel},
      {"model.virtual_pipeline_model_parallel_size", Widen(m.virtual_pipeline_model_parallel_size),
       1, kMaxParallel},
      {"model.context_parallel_size", m.context_parallel_size, 1, kMaxParallel},
      {"model.expert_model_parallel_size", m.expert_model_parallel_size, 1, kMaxParallel},
      {"model.expert_tensor_parallel_size", Widen(m.expert_tensor_parallel_size), 1, kMaxParallel},
      {"model.microbatch_group_size_per_vp_stage", Widen(m.microbatch_group_size_per_vp_stage), 1,
       kMaxParallel},
      {"model.seq_length", m.seq_length, 1, kMaxSeqTokens},
      {"model.recompute_num_layers", Widen(m.recompute_num_layers), 0, kMaxLayers},
      {"model.cpu_offloading_num_layers", m.cpu_offloading_num_layers, 0, kMaxLayers},
      {"train.micro_batch_size", spec.train.micro_batch_size, 1, kMaxBatch},
      {"train.global_batch_size", spec.train.global_batch_size, 1, kMaxBatch},
      {"memtune.world_size", Widen(spec.memtune.world_size), 1, kMaxWorld},
      {"memtune.gpus_per_node", spec.memtune.gpus_per_node, 1, 1024},
  }};
  for (const RangeCheck& c : kChecks) {
    if (c.value && (*c.value < c.lo || *c.value > c.hi)) {
      return OutOfRange(c.path, std::to_string(*c.value), c.lo, c.hi);
    }
  }
  return OkStatus();
}

// The declared values of the fields the spec and the job share.
Job CopyDeclared(const JobSpec& spec) {
  Job job;
  static_cast<ModelBase&>(job.model) = spec.model;
  static_cast<TrainBase&>(job.train) = spec.train;
  job.optimizer = spec.optimizer;
  job.ddp = spec.ddp;
  job.peft = spec.peft;
  static_cast<MemtuneBase&>(job.memtune) = spec.memtune;
  job.mixed_precision = spec.mixed_precision ? spec.mixed_precision->name : "";
  return job;
}

// Bridge MixedPrecisionConfig.setup() when a config is set; without one, pipeline_dtype
// follows params_dtype (MCore ModelParallelConfig.__post_init__).
void ApplyPrecision(const JobSpec& spec, Job& job) {
  if (spec.mixed_precision) {
    SetupPrecision(spec.mixed_precision->config, job.model, job.model.pipeline_dtype, job.optimizer,
                   job.ddp);
  } else {
    job.model.pipeline_dtype = spec.model.pipeline_dtype.value_or(job.model.params_dtype);
  }
}

// MCore TransformerConfig.__post_init__ / ModelParallelConfig.__post_init__ (2a75ac12).
void DeriveArchitecture(const ModelSpec& s, ModelConfig& m) {
  m.ffn_hidden_size = s.ffn_hidden_size.value_or(4 * s.hidden_size);
  m.kv_channels = s.kv_channels.value_or(s.hidden_size / s.num_attention_heads);
  m.num_query_groups = s.num_query_groups.value_or(s.num_attention_heads);
  if (m.num_moe_experts && !m.moe_ffn_hidden_size) m.moe_ffn_hidden_size = m.ffn_hidden_size;
  if (!m.expert_tensor_parallel_size) m.expert_tensor_parallel_size = m.tensor_model_parallel_size;
  if (!m.microbatch_group_size_per_vp_stage) {
    m.microbatch_group_size_per_vp_stage = m.pipeline_model_parallel_size;
  }
  if (s.q_lora_rank) {
    m.q_lora_rank = *s.q_lora_rank;
  } else if (m.multi_latent_attention) {
    m.q_lora_rank = kMlaDefaultQLoraRank;
  }
}

// World size defaults to one data-parallel replica; global batch to one micro-batch per
// DP rank (Megatron-LM arguments.py: global_batch_size = micro_batch_size * dp).
void DeriveLayout(const JobSpec& spec, Job& job) {
  const ModelConfig& m = job.model;
  const std::int64_t model_parallel = static_cast<std::int64_t>(m.tensor_model_parallel_size) *
                                      m.pipeline_model_parallel_size * m.context_parallel_size;
  job.memtune.world_size = spec.memtune.world_size.value_or(
      static_cast<int>(std::min<std::int64_t>(model_parallel, kMaxWorld)));
  const std::int64_t dp = std::max<std::int64_t>(1, job.memtune.world_size / model_parallel);
  job.train.global_batch_size =
      spec.train.global_batch_size.value_or(job.train.micro_batch_size * dp);
  job.model.max_position_embeddings = spec.model.max_position_embeddings.value_or(m.seq_length);
}

// Sets a flag pair on when either is on.
void SyncEither(bool& a, bool& b) {
  if (a || b) a = b = true;
}

// Bridge's sync rules after mixed precision (the parser's NoteSyncRules warns about them).
void ApplySyncRules(const JobSpec& spec, Job& job) {
  // Without a preset nothing syncs the pair in Bridge, but Megatron-LM sets both from one
  // flag (--fp8-param-gather): treat either as both.
  if (!spec.mixed_precision) SyncEither(job.model.fp8_param, job.model.fp8_param_gather);
  bool& ddp_dist = job.ddp.use_distributed_optimizer;
  bool& opt_dist = job.optimizer.use_distributed_optimizer;
  // Bridge ConfigContainer._validate_and_apply_megatron_fsdp_v1_configs.
  if (job.ddp.use_megatron_fsdp) ddp_dist = opt_dist = true;
  // Bridge config.py _validate_and_sync_distributed_optimizer_settings.
  SyncEither(ddp_dist, opt_dist);
}

}  // namespace

Status RequireArchitecture(const ModelSpec& model) {
  const std::array<std::pair<const char*, std::int64_t>, 4> kRequired = {{
      {"model.num_layers", model.num_layers},
      {"model.hidden_size", model.hidden_size},
      {"model.num_attention_heads", model.num_attention_heads},
      {"model.vocab_size", model.vocab_size},
  }};
  for (const auto& [path, value] : kRequired) {
    if (value == 0) {
      return InvalidConfig(path, std::string(path) + " is required",
                           "allowed: a positive integer, or model.preset / model.hf_config");
    }
  }
  return OkStatus();
}

}  // namespace internal

Result<Job> ResolveJob(const JobSpec& spec) {
  MEMTUNE_RETURN_IF_ERROR(internal::CheckRanges(spec));
  MEMTUNE_RETURN_IF_ERROR(internal::RequireArchitecture(spec.model));
  Job job = internal::CopyDeclared(spec);
  internal::ApplyPrecision(spec, job);
  internal::DeriveArchitecture(spec.model, job.model);
  internal::DeriveLayout(spec, job);
  internal::ApplySyncRules(spec, job);
  return job;
}

}  // namespace memtune::model
