// Collected Megatron-LM flags -> the train, optimizer, ddp, mixed_precision, dataset and
// memtune sections of a job (megatron/training/arguments.py @ d98e8a64 validate_args).
#include "model/megatron_args.h"
#include "model/megatron_flag_reader.h"
#include "model/yaml_number.h"

namespace memtune::model::internal {
namespace {

// Megatron-LM's params dtype: fp16 with --fp16, bf16 with --bf16, else fp32.
const char* ParamsDtype(const FlagReader& r) {
  if (r.Switch("fp16")) return "fp16";
  if (r.Switch("bf16")) return "bf16";
  return "fp32";
}

// validate_args: with --bf16, grads accumulate and reduce in fp32 unless
// --grad-reduce-in-bf16 or --main-grads-dtype bf16; otherwise only with the explicit flag.
Result<bool> GradReduceInFp32(const FlagReader& r) {
  MEMTUNE_TRY(auto main_grads, r.Choice("main-grads-dtype", {"fp32", "bf16"}));
  if (r.Switch("accumulate-allreduce-grads-in-fp32")) return true;
  if (r.Switch("bf16"))
    return !r.Switch("grad-reduce-in-bf16") && main_grads.value_or("fp32") == "fp32";
  return false;
}

// Every precision field goes into the mixed_precision mapping, because the job format applies
// it onto model, optimizer and ddp (Bridge MixedPrecisionConfig.setup()).
Result<YAML::Node> MixedPrecision(const FlagReader& r) {
  YAML::Node mp(YAML::NodeType::Map);
  mp["bf16"] = r.Switch("bf16");
  mp["fp16"] = r.Switch("fp16");
  mp["params_dtype"] = ParamsDtype(r);
  mp["pipeline_dtype"] = ParamsDtype(r);
  MEMTUNE_TRY(mp["grad_reduce_in_fp32"], GradReduceInFp32(r));
  MEMTUNE_TRY(auto fp8, r.Choice("fp8-format", {"e4m3", "hybrid"}));
  if (fp8) {
    mp["fp8"] = *fp8;
    MEMTUNE_TRY(auto recipe,
                r.Choice("fp8-recipe", {"tensorwise", "delayed", "mxfp8", "blockwise", "custom"}));
    mp["fp8_recipe"] = recipe.value_or("delayed");  // TransformerConfig default
  }
  mp["fp8_param"] = r.Switch("fp8-param-gather");  // arguments.py: fp8_param = fp8_param_gather
  mp["fp8_param_gather"] = r.Switch("fp8-param-gather");
  if (r.Switch("first-last-layers-bf16")) {
    mp["first_last_layers_bf16"] = true;
    MEMTUNE_TRY(auto start, r.Int("num-layers-at-start-in-bf16"));
    MEMTUNE_TRY(auto end, r.Int("num-layers-at-end-in-bf16"));
    mp["num_layers_at_start_in_bf16"] = start.value_or(1);
    mp["num_layers_at_end_in_bf16"] = end.value_or(1);
  }
  return mp;
}

Result<YAML::Node> Optimizer(const FlagReader& r) {
  YAML::Node o(YAML::NodeType::Map);
  MEMTUNE_TRY(auto name, r.Choice("optimizer", {"adam", "sgd"}));
  o["optimizer"] = name.value_or("adam");
  o["use_distributed_optimizer"] = r.Switch("use-distributed-optimizer");
  o["use_precision_aware_optimizer"] = r.Switch("use-precision-aware-optimizer");
  MEMTUNE_RETURN_IF_ERROR(
      CopyChoice(r, o, "main-params-dtype", "main_params_dtype", {"fp32", "fp16"}));
  MEMTUNE_RETURN_IF_ERROR(
      CopyChoice(r, o, "main-grads-dtype", "main_grads_dtype", {"fp32", "bf16"}));
  for (const auto& [flag, field] :
       {std::pair{"exp-avg-dtype", "exp_avg_dtype"}, {"exp-avg-sq-dtype", "exp_avg_sq_dtype"}}) {
    MEMTUNE_RETURN_IF_ERROR(CopyChoice(r, o, flag, field, {"fp32", "fp16", "bf16", "fp8"}));
  }
  o["optimizer_cpu_offload"] = r.Switch("optimizer-cpu-offload");
  MEMTUNE_TRY(auto fraction, r.Float("optimizer-offload-fraction"));
  if (fraction) o["optimizer_offload_fraction"] = ShortestNumberNode(*fraction);
  return o;
}

Result<YAML::Node> Ddp(const FlagReader& r) {
  YAML::Node d(YAML::NodeType::Map);
  MEMTUNE_TRY(d["grad_reduce_in_fp32"], GradReduceInFp32(r));
  d["use_distributed_optimizer"] = r.Switch("use-distributed-optimizer");
  d["overlap_grad_reduce"] = r.Switch("overlap-grad-reduce");
  d["overlap_param_gather"] = r.Switch("overlap-param-gather");
  d["use_megatron_fsdp"] = r.Switch("use-megatron-fsdp");
  MEMTUNE_TRY(auto strategy, r.Choice("data-parallel-sharding-strategy",
                                      {"no_shard", "optim", "optim_grads", "optim_grads_params"}));
  // arguments.py default optim_grads_params; it only matters with Megatron-FSDP.
  if (strategy || r.Switch("use-megatron-fsdp")) {
    d["data_parallel_sharding_strategy"] = strategy.value_or("optim_grads_params");
  }
  MEMTUNE_RETURN_IF_ERROR(
      CopyInt(r, d, "num-distributed-optimizer-instances", "num_distributed_optimizer_instances"));
  d["nccl_ub"] = r.Switch("use-nccl-ub");
  return d;
}

// micro/global batch; validate_args: global defaults to micro * data-parallel size.
Result<YAML::Node> Train(const FlagReader& r, const YAML::Node& model, int world_size) {
  YAML::Node t(YAML::NodeType::Map);
  MEMTUNE_TRY(auto micro, r.Int("micro-batch-size"));
  MEMTUNE_TRY(auto global, r.Int("global-batch-size"));
  if (micro) t["micro_batch_size"] = *micro;
  std::int64_t model_parallel = 1;
  for (const char* field :
       {"tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size"}) {
    if (model[field]) model_parallel *= model[field].as<std::int64_t>();
  }
  if (!global && micro && world_size > 0 && model_parallel > 0) {
    global = *micro * (world_size / model_parallel);
  }
  if (global) t["global_batch_size"] = *global;
  return t;
}

YAML::Node Memtune(const MegatronFlags& flags, int world_size) {
  YAML::Node m(YAML::NodeType::Map);
  m["framework"] = "megatron";
  if (world_size > 0) m["world_size"] = world_size;
  if (flags.nproc_per_node > 0) m["gpus_per_node"] = flags.nproc_per_node;
  if (!flags.env.empty()) {
    YAML::Node env(YAML::NodeType::Map);
    for (const auto& [name, value] : flags.env) env[name] = value;
    m["env"] = env;
  }
  return m;
}

}  // namespace

Status AddRunSections(const MegatronFlags& flags, YAML::Node& job) {
  const FlagReader r(flags);
  const int world_size =
      flags.nproc_per_node > 0 ? std::max(flags.nnodes, 1) * flags.nproc_per_node : 0;
  MEMTUNE_TRY(job["train"], Train(r, job["model"], world_size));
  MEMTUNE_TRY(job["optimizer"], Optimizer(r));
  MEMTUNE_TRY(job["ddp"], Ddp(r));
  MEMTUNE_TRY(job["mixed_precision"], MixedPrecision(r));
  if (job["model"]["seq_length"]) {
    YAML::Node dataset(YAML::NodeType::Map);
    dataset["seq_length"] = job["model"]["seq_length"].as<std::int64_t>();
    job["dataset"] = dataset;
  }
  job["memtune"] = Memtune(flags, world_size);
  return OkStatus();
}

}  // namespace memtune::model::internal
