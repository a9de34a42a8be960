// The parser's steps after the sections are read: the document-level seq_length rule and
// the notes (warnings, defaulted fields) about what ResolveJob's rules do (job_resolve.cc).
// Every rule cites the upstream code it reproduces.
#include <algorithm>

#include "model/job_parse_internal.h"

namespace memtune::model::internal {
namespace {

// GPTModelProvider.seq_length (Megatron-Bridge 067f987d models/gpt_provider.py).
constexpr std::int64_t kBridgeDefaultSeqTokens = 1024;

// model.seq_length and dataset.seq_length should agree (Bridge ConfigContainer.validate
// asserts it); when both are given and differ, the dataset's wins (a `check` finding). A value
// from model.preset / hf_config is not explicit: the dataset's wins silently.
Status ResolveSeqLength(const YAML::Node& dataset, ParseContext& ctx) {
  // (A missing key is an invalid node: copied, never assigned, which yaml-cpp refuses.)
  YAML::Node ds;
  if (dataset && dataset.IsMap()) {
    for (const char* key : {"seq_length", "sequence_length"}) {
      const YAML::Node value = dataset[key];
      if (value && !value.IsNull()) {
        ds.reset(value);
        break;
      }
    }
  }
  ModelSpec& m = ctx.spec.model;
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
  // Bridge's ConfigContainer.validate asserts they agree, yet real dumps of runs that
  // trained disagree: the batches the dataset yields are what the tensors are sized by.
  // The check rule layout.seq-length-mismatch reports it.
  m.written_model_seq_length = model_explicit && m.seq_length != ds_tokens ? m.seq_length : 0;
  m.seq_length = ds_tokens;
  ctx.present.insert("model.seq_length");
  ctx.doc.defaulted_fields.erase("model.seq_length");
  return OkStatus();
}

void NotePrecisionDefaults(ParseContext& ctx) {
  const JobSpec& spec = ctx.spec;
  const bool precision_given =
      ctx.Has("model.bf16") || ctx.Has("model.fp16") || ctx.Has("model.params_dtype");
  if (!spec.mixed_precision && !precision_given && spec.memtune.framework == Framework::kMegatron) {
    ctx.Warn(
        "no mixed_precision and no model.bf16/fp16/params_dtype: the job trains in fp32 "
        "(Bridge's default); set mixed_precision: bf16_mixed for bf16 training");
  }
  if (spec.optimizer.optimizer_cpu_offload && !ctx.Has("optimizer.optimizer_offload_fraction")) {
    ctx.Warn(
        "optimizer.optimizer_cpu_offload is on but optimizer.optimizer_offload_fraction is "
        "absent: MCore OptimizerConfig's default 0.0 offloads nothing (Megatron-LM's "
        "--optimizer-offload-fraction defaults to 1.0)");
  }
}

}  // namespace

void ApplyUpstreamDefaults(JobSpec& spec) {
  spec.model.seq_length = kBridgeDefaultSeqTokens;
  spec.model.cross_entropy_loss_fusion = true;  // GPTModelProvider (MCore's own: False)
  spec.model.fp8_recipe = Fp8Recipe::kDelayed;  // TransformerConfig.fp8_recipe
  spec.model.num_layers_at_start_in_bf16 = 1;   // TransformerConfig
  spec.model.num_layers_at_end_in_bf16 = 1;
  spec.optimizer.optimizer_offload_fraction = 0.0;  // MCore OptimizerConfig
}

Status DeriveDefaults(const YAML::Node& dataset, ParseContext& ctx) {
  MEMTUNE_RETURN_IF_ERROR(RequireArchitecture(ctx.spec.model));
  MEMTUNE_RETURN_IF_ERROR(ResolveSeqLength(dataset, ctx));
  NotePrecisionDefaults(ctx);
  // torchtitan's reshard_after_forward policy "default": `not pp_enabled` (v0.2.2
  // models/llama3/infra/parallelize.py apply_fsdp), to avoid an all-gather per micro-batch.
  JobSpec& spec = ctx.spec;
  if (spec.memtune.framework == Framework::kFsdp2 && spec.model.pipeline_model_parallel_size > 1 &&
      !ctx.Has("memtune.fsdp2.reshard_after_forward")) {
    spec.memtune.fsdp2.reshard_after_forward = false;
  }
  return OkStatus();
}

void NoteSyncRules(ParseContext& ctx) {
  // The same decisions as ResolveJob's SyncDistributedOptimizer (job_resolve.cc).
  bool ddp_dist = ctx.spec.ddp.use_distributed_optimizer;
  bool opt_dist = ctx.spec.optimizer.use_distributed_optimizer;
  if (ctx.spec.ddp.use_megatron_fsdp && !(ddp_dist && opt_dist)) {
    ctx.Warn(
        "ddp.use_megatron_fsdp = true turns the distributed optimizer on in ddp and "
        "optimizer (Bridge requires it for Megatron-FSDP)");
    ddp_dist = opt_dist = true;
  }
  if (ddp_dist != opt_dist) {
    ctx.Warn(std::string("ddp.use_distributed_optimizer = ") + (ddp_dist ? "true" : "false") +
             " and optimizer.use_distributed_optimizer = " + (opt_dist ? "true" : "false") +
             " disagree; Bridge turns the distributed optimizer on in both");
  }
}

void ClearSyncedDefaults(ParseContext& ctx) {
  if (ctx.doc.job.ddp.use_distributed_optimizer)
    ctx.doc.defaulted_fields.erase("ddp.use_distributed_optimizer");
  if (ctx.doc.job.optimizer.use_distributed_optimizer)
    ctx.doc.defaulted_fields.erase("optimizer.use_distributed_optimizer");
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
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

// The fields the FSDP2 (torchtitan) model reads (src/estimate/fsdp2_tensors.cc); the
// other Megatron defaults do not change an fsdp2 job's result.
bool Fsdp2Reads(const std::string& path) {
  static const char* const kRead[] = {"model.num_layers",
                                      "model.hidden_size",
                                      "model.ffn_hidden_size",
                                      "model.num_attention_heads",
                                      "model.num_query_groups",
                                      "model.kv_channels",
                                      "model.vocab_size",
                                      "model.make_vocab_size_divisible_by",
                                      "model.should_pad_vocab",
                                      "model.share_embeddings_and_output_weights",
                                      "model.gated_linear_unit",
                                      "model.activation_func",
                                      "model.normalization",
                                      "model.add_bias_linear",
                                      "model.add_qkv_bias",
                                      "model.qk_layernorm",
                                      "model.tensor_model_parallel_size",
                                      "model.seq_length"};
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
