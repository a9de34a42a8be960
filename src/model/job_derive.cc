// Defaults that depend on other fields, and Bridge's sync rules: the steps after the
// sections are read. Every rule cites the upstream code it reproduces.
#include <algorithm>

#include "model/job_parse_internal.h"

namespace memtune::model::internal {
namespace {

// GPTModelProvider.seq_length (Megatron-Bridge 067f987d models/gpt_provider.py).
constexpr std::int64_t kBridgeDefaultSeqTokens = 1024;
// MLATransformerConfig.q_lora_rank (MCore 2a75ac12 transformer_config.py).
constexpr std::int64_t kMlaDefaultQLoraRank = 512;

Status RequireArchitecture(const ParseContext& ctx) {
  for (const char* name : {"num_layers", "hidden_size", "num_attention_heads", "vocab_size"}) {
    const std::string path = std::string("model.") + name;
    if (!ctx.Has(path)) {
      return InvalidConfig(path, path + " is required",
                           "allowed: a positive integer, or model.preset / model.hf_config");
    }
  }
  return OkStatus();
}

// MCore TransformerConfig.__post_init__ / ModelParallelConfig.__post_init__ (2a75ac12).
void DeriveArchitecture(ParseContext& ctx) {
  ModelConfig& m = ctx.doc.job.model;
  if (!ctx.Has("model.ffn_hidden_size")) m.ffn_hidden_size = 4 * m.hidden_size;
  if (!ctx.Has("model.kv_channels")) m.kv_channels = m.hidden_size / m.num_attention_heads;
  if (!ctx.Has("model.num_query_groups")) m.num_query_groups = m.num_attention_heads;
  if (m.num_moe_experts && !m.moe_ffn_hidden_size) m.moe_ffn_hidden_size = m.ffn_hidden_size;
  if (!m.expert_tensor_parallel_size) m.expert_tensor_parallel_size = m.tensor_model_parallel_size;
  if (!m.microbatch_group_size_per_vp_stage) {
    m.microbatch_group_size_per_vp_stage = m.pipeline_model_parallel_size;
  }
  if (m.multi_latent_attention && !ctx.Has("model.q_lora_rank"))
    m.q_lora_rank = kMlaDefaultQLoraRank;
}

// model.seq_length and dataset.seq_length must agree (Bridge ConfigContainer.validate
// asserts it). A value from model.preset / hf_config is not explicit: the dataset's wins.
Status ResolveSeqLength(const YAML::Node& dataset, ParseContext& ctx) {
  YAML::Node ds;
  if (dataset && dataset.IsMap()) {
    const YAML::Node& d = dataset;
    ds = d["seq_length"] && !d["seq_length"].IsNull() ? d["seq_length"] : d["sequence_length"];
  }
  ModelConfig& m = ctx.doc.job.model;
  const bool model_explicit =
      ctx.model_explicit.count("seq_length") > 0 && ctx.Has("model.seq_length");
  if (!ds || ds.IsNull()) {
    if (ctx.Has("model.seq_length") && !model_explicit) {
      const char* from = m.preset.empty() ? "model.hf_config" : "model.preset";
      ctx.Warn("model.seq_length = " + std::to_string(m.seq_length) + " comes from " + from +
               " (the model's max_position_embeddings); set dataset.seq_length (or --seq) to "
               "the training sequence length");
    }
    return OkStatus();
  }
  const std::int64_t ds_tokens = ds.as<std::int64_t>();  // validated by the dataset table
  if (model_explicit && m.seq_length != ds_tokens) {
    return InvalidConfig("dataset.seq_length",
                         "dataset.seq_length = " + std::to_string(ds_tokens) +
                             " does not match model.seq_length = " + std::to_string(m.seq_length),
                         "allowed: the same value in both (Bridge ConfigContainer.validate)");
  }
  m.seq_length = ds_tokens;
  ctx.present.insert("model.seq_length");
  ctx.doc.defaulted_fields.erase("model.seq_length");
  return OkStatus();
}

// World size defaults to one data-parallel replica; global batch to one micro-batch per
// DP rank (Megatron-LM arguments.py: global_batch_size = micro_batch_size * dp).
void DeriveLayoutDefaults(ParseContext& ctx) {
  Job& job = ctx.doc.job;
  const ModelConfig& m = job.model;
  const std::int64_t model_parallel = static_cast<std::int64_t>(m.tensor_model_parallel_size) *
                                      m.pipeline_model_parallel_size * m.context_parallel_size;
  if (!ctx.Has("memtune.world_size")) {
    job.memtune.world_size = static_cast<int>(std::min<std::int64_t>(model_parallel, 1'000'000));
  }
  if (!ctx.Has("train.global_batch_size")) {
    const std::int64_t dp = std::max<std::int64_t>(1, job.memtune.world_size / model_parallel);
    job.train.global_batch_size = job.train.micro_batch_size * dp;
  }
  if (!ctx.Has("model.max_position_embeddings")) job.model.max_position_embeddings = m.seq_length;
}

void DerivePrecisionDefaults(ParseContext& ctx) {
  Job& job = ctx.doc.job;
  if (job.mixed_precision.empty() && !ctx.Has("model.pipeline_dtype")) {
    job.model.pipeline_dtype = job.model.params_dtype;
  }
  const bool precision_given =
      ctx.Has("model.bf16") || ctx.Has("model.fp16") || ctx.Has("model.params_dtype");
  if (job.mixed_precision.empty() && !precision_given &&
      job.memtune.framework == Framework::kMegatron) {
    ctx.Warn(
        "no mixed_precision and no model.bf16/fp16/params_dtype: the job trains in fp32 "
        "(Bridge's default); set mixed_precision: bf16_mixed for bf16 training");
  }
  if (job.optimizer.optimizer_cpu_offload && !ctx.Has("optimizer.optimizer_offload_fraction")) {
    ctx.Warn(
        "optimizer.optimizer_cpu_offload is on but optimizer.optimizer_offload_fraction is "
        "absent: MCore OptimizerConfig's default 0.0 offloads nothing (Megatron-LM's "
        "--optimizer-offload-fraction defaults to 1.0)");
  }
}

// Sets a flag pair on when either is on; returns true if that changed one of them.
bool SyncEither(bool& a, bool& b) {
  if (a == b || !(a || b)) return false;
  a = b = true;
  return true;
}

}  // namespace

void ApplyUpstreamDefaults(Job& job) {
  job.model.seq_length = kBridgeDefaultSeqTokens;
  job.model.cross_entropy_loss_fusion = true;  // GPTModelProvider (MCore's own: False)
  job.model.fp8_recipe = "delayed";            // TransformerConfig.fp8_recipe
  job.model.num_layers_at_start_in_bf16 = 1;   // TransformerConfig
  job.model.num_layers_at_end_in_bf16 = 1;
  job.optimizer.optimizer_offload_fraction = 0.0;  // MCore OptimizerConfig
}

Status DeriveDefaults(const YAML::Node& dataset, ParseContext& ctx) {
  MEMTUNE_RETURN_IF_ERROR(RequireArchitecture(ctx));
  MEMTUNE_RETURN_IF_ERROR(ResolveSeqLength(dataset, ctx));
  DeriveArchitecture(ctx);
  DeriveLayoutDefaults(ctx);
  DerivePrecisionDefaults(ctx);
  return OkStatus();
}

void ApplySyncRules(ParseContext& ctx) {
  Job& job = ctx.doc.job;
  // Without a preset nothing syncs the pair in Bridge, but Megatron-LM sets both from one
  // flag (--fp8-param-gather): treat either as both.
  if (job.mixed_precision.empty()) SyncEither(job.model.fp8_param, job.model.fp8_param_gather);
  bool& ddp_dist = job.ddp.use_distributed_optimizer;
  bool& opt_dist = job.optimizer.use_distributed_optimizer;
  // Bridge ConfigContainer._validate_and_apply_megatron_fsdp_v1_configs.
  if (job.ddp.use_megatron_fsdp && !(ddp_dist && opt_dist)) {
    ctx.Warn(
        "ddp.use_megatron_fsdp = true turns the distributed optimizer on in ddp and "
        "optimizer (Bridge requires it for Megatron-FSDP)");
    ddp_dist = opt_dist = true;
  }
  // Bridge config.py _validate_and_sync_distributed_optimizer_settings.
  const bool ddp_before = ddp_dist;
  const bool opt_before = opt_dist;
  if (SyncEither(ddp_dist, opt_dist)) {
    ctx.Warn(std::string("ddp.use_distributed_optimizer = ") + (ddp_before ? "true" : "false") +
             " and optimizer.use_distributed_optimizer = " + (opt_before ? "true" : "false") +
             " disagree; Bridge turns the distributed optimizer on in both");
  }
  if (ddp_dist) ctx.doc.defaulted_fields.erase("ddp.use_distributed_optimizer");
  if (opt_dist) ctx.doc.defaulted_fields.erase("optimizer.use_distributed_optimizer");
}

std::string JsonText(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array()) {
    std::string text = "[";
    for (std::size_t i = 0; i < value.size(); ++i) text += (i ? ", " : "") + JsonText(value[i]);
    return text + "]";
  }
  if (value.is_object()) {
    std::string text = "{";
    bool first = true;
    for (const auto& [k, v] : value.items()) {
      text += (first ? "" : ", ") + k + ": " + JsonText(v);
      first = false;
    }
    return text + "}";
  }
  return value.dump();
}

namespace {

// The fields the FSDP2 (torchtitan) model reads (src/estimate/fsdp2_tensors.cc); the
// other Megatron defaults do not change an fsdp2 job's result.
bool Fsdp2Reads(const std::string& path) {
  static const char* const kRead[] = {
      "model.num_layers", "model.hidden_size", "model.ffn_hidden_size", "model.num_attention_heads",
      "model.num_query_groups", "model.kv_channels", "model.vocab_size", "model.make_vocab_size_divisible_by",
      "model.should_pad_vocab", "model.share_embeddings_and_output_weights", "model.gated_linear_unit",
      "model.activation_func", "model.normalization", "model.add_bias_linear", "model.add_qkv_bias",
      "model.qk_layernorm", "model.tensor_model_parallel_size", "model.seq_length"};
  if (path.rfind("train.", 0) == 0 || path.rfind("memtune.", 0) == 0) return true;
  for (const char* read : kRead) {
    if (path == read) return true;
  }
  return false;
}

void ListSection(const SectionSpec& spec, ParseContext& ctx) {
  for (const FieldSpec& f : spec.fields) {
    if (f.subsection) ListSection(*f.subsection, ctx);
    const std::string path = spec.path + "." + f.name;
    if (!f.memory_default || !ctx.doc.defaulted_fields.count(path)) continue;
    if (f.relevant && !f.relevant(ctx.doc.job)) continue;
    if (ctx.doc.job.memtune.framework == Framework::kFsdp2 && !Fsdp2Reads(path)) continue;
    ctx.doc.defaults_used.push_back(path + " = " + JsonText(f.write(ctx.doc.job)) +
                                    " (default: " + f.memory_default + ")");
  }
}

}  // namespace

void ListMemoryDefaults(ParseContext& ctx) {
  for (const SectionSpec* spec :
       {&ModelTable(), &TrainTable(), &OptimizerTable(), &DdpTable(), &MemtuneTable()}) {
    ListSection(*spec, ctx);
  }
  if (ctx.doc.job.peft) ListSection(PeftTable(), ctx);
}

}  // namespace memtune::model::internal
