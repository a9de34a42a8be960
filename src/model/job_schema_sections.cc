// Field tables of the train, optimizer, ddp, dataset, peft and memtune sections.
// Defaults: MCore OptimizerConfig / DistributedDataParallelConfig at 2a75ac12, Bridge
// LoRA/DoRA (peft/lora.py, peft/dora.py), torchtitan for memtune.fsdp2.
#include <cctype>

#include "memtune/core/units.h"
#include "memtune/model/gpu_catalog.h"
#include "model/job_schema.h"

namespace memtune::model::internal {
namespace {

constexpr std::int64_t kMaxBucketElements = 1'000'000'000'000;

bool CpuOffload(const Job& j) { return j.optimizer.optimizer_cpu_offload; }
bool IsFsdp2(const Job& j) { return j.memtune.framework == Framework::kFsdp2; }
bool IsMegatron(const Job& j) { return j.memtune.framework == Framework::kMegatron; }
bool IsMegatronMoe(const Job& j) {
  return IsMegatron(j) && j.model.num_moe_experts.value_or(0) > 0;
}
bool IsCompiledFsdp2(const Job& j) { return IsFsdp2(j) && j.memtune.fsdp2.compile; }
bool IsPipelinedFsdp2(const Job& j) {
  return IsFsdp2(j) && j.model.pipeline_model_parallel_size > 1;
}

template <typename S>
Binder<S> Bind(S& (*get)(JobSpec&), const S& (*cget)(const Job&)) {
  return Binder<S>{get, cget};
}

SectionSpec BuildTrain() {
  const auto t = Bind<TrainBase>([](JobSpec& j) -> TrainBase& { return j.train; },
                                 [](const Job& j) -> const TrainBase& { return j.train; });
  const DerivedBinder<TrainSpec, TrainConfig> derived{
      [](JobSpec& j) -> TrainSpec& { return j.train; },
      [](const Job& j) -> const TrainConfig& { return j.train; }};
  return {"train",
          {Memory(t.Int("micro_batch_size", &TrainConfig::micro_batch_size, 1, kMaxBatch), "1"),
           Memory(derived.Int("global_batch_size", &TrainSpec::global_batch_size,
                              &TrainConfig::global_batch_size, 1, kMaxBatch),
                  "micro_batch_size * data-parallel size")},
          false,
          {"eval_global_batch_size", "eval_micro_batch_size"}};
}

// optimizer.overlap_param_gather: Bridge syncs it with ddp's (either on -> both on).
FieldSpec OptimizerOverlapParamGather() {
  return {"overlap_param_gather",
          [](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
            MEMTUNE_TRY(const bool on, ToBool(n, p));
            if (on) j.ddp.overlap_param_gather = true;
            return OkStatus();
          },
          nullptr};
}

SectionSpec BuildOptimizer() {
  const auto o =
      Bind<OptimizerConfig>([](JobSpec& j) -> OptimizerConfig& { return j.optimizer; },
                            [](const Job& j) -> const OptimizerConfig& { return j.optimizer; });
  const std::vector<Dtype> kMoment = {Dtype::kFp32, Dtype::kFp16, Dtype::kBf16, Dtype::kFp8};
  return {"optimizer",
          {o.Named("optimizer", &OptimizerConfig::optimizer),
           Memory(o.Bool("use_distributed_optimizer", &OptimizerConfig::use_distributed_optimizer),
                  "MCore OptimizerConfig", IsMegatron),
           o.Bool("use_precision_aware_optimizer", &OptimizerConfig::use_precision_aware_optimizer),
           o.DtypeField("main_params_dtype", &OptimizerConfig::main_params_dtype,
                        {Dtype::kFp32, Dtype::kFp16}),
           o.DtypeField("main_grads_dtype", &OptimizerConfig::main_grads_dtype,
                        {Dtype::kFp32, Dtype::kBf16}),
           o.DtypeField("exp_avg_dtype", &OptimizerConfig::exp_avg_dtype, kMoment),
           o.DtypeField("exp_avg_sq_dtype", &OptimizerConfig::exp_avg_sq_dtype, kMoment),
           o.Bool("optimizer_cpu_offload", &OptimizerConfig::optimizer_cpu_offload),
           Memory(o.Double("optimizer_offload_fraction",
                           &OptimizerConfig::optimizer_offload_fraction, 0, 1),
                  "MCore OptimizerConfig", CpuOffload),
           o.Bool("overlap_cpu_optimizer_d2h_h2d", &OptimizerConfig::overlap_cpu_optimizer_d2h_h2d),
           o.Bool("overlap_param_gather_with_optimizer_step",
                  &OptimizerConfig::overlap_param_gather_with_optimizer_step),
           o.Bool("bf16", &OptimizerConfig::bf16), o.Bool("fp16", &OptimizerConfig::fp16),
           OptimizerOverlapParamGather()},
          false};
}

// ddp.fp8_param_gather: MCore keeps it on the DDP config; the Job keeps it beside fp8_param.
FieldSpec DdpFp8ParamGather() {
  return {"fp8_param_gather",
          [](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
            MEMTUNE_TRY(j.model.fp8_param_gather, ToBool(n, p));
            return OkStatus();
          },
          nullptr};
}

SectionSpec BuildDdp() {
  const auto d = Bind<DdpConfig>([](JobSpec& j) -> DdpConfig& { return j.ddp; },
                                 [](const Job& j) -> const DdpConfig& { return j.ddp; });
  const FieldSpec fsdp = d.Bool("use_megatron_fsdp", &DdpConfig::use_megatron_fsdp);
  return {
      "ddp",
      {Memory(d.Bool("grad_reduce_in_fp32", &DdpConfig::grad_reduce_in_fp32),
              "MCore DistributedDataParallelConfig", IsMegatron),
       d.Bool("use_distributed_optimizer", &DdpConfig::use_distributed_optimizer),
       d.Bool("overlap_grad_reduce", &DdpConfig::overlap_grad_reduce),
       d.Bool("overlap_param_gather", &DdpConfig::overlap_param_gather), fsdp,
       Alias("use_custom_fsdp", fsdp),
       d.Named("data_parallel_sharding_strategy", &DdpConfig::data_parallel_sharding_strategy),
       d.Int("num_distributed_optimizer_instances", &DdpConfig::num_distributed_optimizer_instances,
             1, kMaxParallel),
       d.OptInt("bucket_size", &DdpConfig::bucket_size, 1, kMaxBucketElements),
       d.Bool("average_in_collective", &DdpConfig::average_in_collective),
       d.Bool("nccl_ub", &DdpConfig::nccl_ub),
       d.Bool("reuse_grad_buf_for_mxfp8_param_ag", &DdpConfig::reuse_grad_buf_for_mxfp8_param_ag),
       DdpFp8ParamGather()},
      false,
      {"fp4_param_gather"}};
}

// dataset.seq_length is checked here and compared with model.seq_length by the parser
// (job_parse.cc); the Job keeps only the model's.
SectionSpec BuildDataset() {
  FieldSpec seq{"seq_length",
                [](const YAML::Node& n, const std::string& p, JobSpec&) -> Status {
                  MEMTUNE_RETURN_IF_ERROR(ToInt(n, p, 1, 100'000'000));
                  return OkStatus();
                },
                [](const Job& j) { return Json(j.model.seq_length); }};
  return {"dataset", {seq, Alias("sequence_length", seq)}, false, {"max_sequence_length"}};
}

// peft._target_: "lora" | "dora", or the class path Bridge dumps
// (megatron.bridge.peft.lora.LoRA, megatron.bridge.peft.dora.DoRA, ...VLMLoRA).
FieldSpec PeftTargetField() {
  return {"_target_",
          [](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
            MEMTUNE_TRY(std::string name, ToName(n, p));
            std::string last =
                name.substr(name.rfind('.') == std::string::npos ? 0 : name.rfind('.') + 1);
            for (char& c : last) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            if (last == "lora" || last == "vlmlora") {
              j.peft->method = PeftMethod::kLora;
            } else if (last == "dora") {
              j.peft->method = PeftMethod::kDora;
              j.peft->alpha = 64;  // Bridge peft/dora.py: DoRA.alpha = 64
            } else {
              return InvalidConfig(p, p + " = '" + name + "' is not a supported PEFT method",
                                   AllowedHint(last, {"lora", "dora"}) +
                                       " (or Bridge's megatron.bridge.peft.lora.LoRA, "
                                       "megatron.bridge.peft.dora.DoRA)");
            }
            return OkStatus();
          },
          [](const Job& j) { return Json(NameOf(j.peft ? j.peft->method : PeftMethod::kLora)); }};
}

SectionSpec BuildPeft() {
  const auto p = Bind<PeftConfig>([](JobSpec& j) -> PeftConfig& { return *j.peft; },
                                  [](const Job& j) -> const PeftConfig& { return *j.peft; });
  return {
      "peft",
      {Memory(PeftTargetField(), "Bridge LoRA"),
       Memory(p.Int("dim", &PeftConfig::dim, 1, kMaxDim), "Bridge LoRA/DoRA"),
       p.Double("alpha", &PeftConfig::alpha, 0, 1e9),
       Memory(p.Names("target_modules", &PeftConfig::target_modules), "Bridge LoRA/DoRA"),
       p.Bool("sequence_parallel_input_regather", &PeftConfig::sequence_parallel_input_regather),
       Memory(p.Bool("normalize_moe_lora", &PeftConfig::normalize_moe_lora), "Bridge LoRA"),
       Memory(p.Bool("share_expert_adapters", &PeftConfig::share_expert_adapters), "Bridge LoRA"),
       Memory(p.Bool("experts_shared_outer_loras", &PeftConfig::experts_shared_outer_loras),
              "Bridge LoRA")},
      false};
}

// memtune.gpu_memory_bytes: an integer or a size with a unit ("80GiB").
FieldSpec GpuMemoryField() {
  FieldSpec f{
      "gpu_memory_bytes",
      [](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
        if (n.IsNull()) {
          j.memtune.gpu_memory_bytes.reset();
          return OkStatus();
        }
        if (n.IsScalar() && IsQuoted(n)) {
          MEMTUNE_TRY(const std::int64_t bytes, ParseBytes(n.Scalar(), p));
          // The same range as the integer form: "0.1B" rounds to 0, "2048TiB" is
          // beyond the largest capacity memtune models.
          if (bytes < 1 || bytes > kMaxDeviceBytes) {
            return InvalidConfig(p,
                                 p + " = '" + n.Scalar() + "' (" + FormatWithCommas(bytes) +
                                     " bytes) is out of range",
                                 "allowed: 1 to " + FormatWithCommas(kMaxDeviceBytes) + " bytes");
          }
          j.memtune.gpu_memory_bytes = bytes;
          return OkStatus();
        }
        MEMTUNE_TRY(j.memtune.gpu_memory_bytes, ToInt(n, p, 1, kMaxDeviceBytes));
        return OkStatus();
      },
      [](const Job& j) {
        return j.memtune.gpu_memory_bytes ? Json(*j.memtune.gpu_memory_bytes) : Json(nullptr);
      }};
  f.null_is_value = true;
  return f;
}

// memtune.gpu: a GPU catalog name or alias (model/gpu_catalog.h), kept as the catalog name.
FieldSpec GpuField() {
  return {"gpu",
          [](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
            MEMTUNE_TRY(const std::string name, ToName(n, p));
            auto gpu = FindGpu(name);
            if (!gpu) return Error{gpu.error().code, p, gpu.error().message, gpu.error().hint};
            j.memtune.gpu = gpu->name;
            return OkStatus();
          },
          [](const Job& j) { return j.memtune.gpu.empty() ? Json(nullptr) : Json(j.memtune.gpu); }};
}

// memtune.env: launch environment variables, name -> value (scalars kept as text).
FieldSpec EnvField() {
  return {"env",
          [](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
            if (!n.IsMap()) return WrongType(n, p, "a mapping", "NAME: value pairs");
            for (const auto& kv : n) {
              const std::string name = kv.first.Scalar();
              if (!kv.second.IsScalar()) {
                return WrongType(kv.second, p + "." + name, "a string", "a scalar value");
              }
              j.memtune.env[name] = kv.second.Scalar();
            }
            return OkStatus();
          },
          [](const Job& j) { return Json(j.memtune.env); }};
}

// Flattens a torchtitan JobConfig mapping into "section.name" -> scalar text.
Status FlattenTorchtitan(const YAML::Node& n, const std::string& path, const std::string& prefix,
                         int depth, std::map<std::string, std::string>& out) {
  if (!n.IsMap()) return WrongType(n, path, "a mapping", "torchtitan JobConfig sections");
  if (depth > 4) return InvalidInput(path, "nests deeper than torchtitan's config does");
  for (const auto& kv : n) {
    const std::string key = prefix.empty() ? kv.first.Scalar() : prefix + "." + kv.first.Scalar();
    const YAML::Node& v = kv.second;
    if (v.IsMap()) {
      MEMTUNE_RETURN_IF_ERROR(
          FlattenTorchtitan(v, path + "." + kv.first.Scalar(), key, depth + 1, out));
    } else if (v.IsSequence()) {
      std::string joined;
      for (const auto& item : v) {
        if (!item.IsScalar())
          return WrongType(item, path + "." + key, "a scalar", "a list of names");
        joined += (joined.empty() ? "" : ",") + item.Scalar();
      }
      out[key] = joined;
    } else {
      out[key] = v.IsNull() ? "" : v.Scalar();
    }
  }
  return OkStatus();
}

FieldSpec TorchtitanField() {
  return {"torchtitan",
          [](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
            return FlattenTorchtitan(n, p, "", 0, j.memtune.torchtitan);
          },
          [](const Job& j) { return Json(j.memtune.torchtitan); }};
}

// fsdp2.shard_degree: torchtitan's data_parallel_shard_degree; -1 (and 0) = derived.
FieldSpec ShardDegreeField() {
  return {"shard_degree",
          [](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
            MEMTUNE_TRY(const std::int64_t v, ToInt(n, p, -1, kMaxWorld));
            j.memtune.fsdp2.shard_degree = v < 0 ? 0 : static_cast<int>(v);
            return OkStatus();
          },
          [](const Job& j) { return Json(j.memtune.fsdp2.shard_degree); }};
}

SectionSpec BuildFsdp2() {
  const auto f =
      Bind<Fsdp2Config>([](JobSpec& j) -> Fsdp2Config& { return j.memtune.fsdp2; },
                        [](const Job& j) -> const Fsdp2Config& { return j.memtune.fsdp2; });
  return {
      "memtune.fsdp2",
      {Memory(ShardDegreeField(), "world / (tp * pp * cp)", IsFsdp2),
       Memory(f.Bool("reshard_after_forward", &Fsdp2Config::reshard_after_forward),
              "torchtitan (false with pipeline parallelism)", IsFsdp2),
       Memory(f.Named("pipeline_schedule", &Fsdp2Config::pipeline_schedule), "torchtitan",
              IsPipelinedFsdp2),
       Memory(f.DtypeField("param_dtype", &Fsdp2Config::param_dtype,
                           {Dtype::kFp32, Dtype::kBf16, Dtype::kFp16}),
              "torchtitan", IsFsdp2),
       Memory(f.DtypeField("reduce_dtype", &Fsdp2Config::reduce_dtype,
                           {Dtype::kFp32, Dtype::kBf16, Dtype::kFp16}),
              "torchtitan", IsFsdp2),
       Memory(f.Named("activation_checkpoint", &Fsdp2Config::activation_checkpoint), "torchtitan",
              IsFsdp2),
       f.Bool("float8", &Fsdp2Config::float8), f.Bool("compile", &Fsdp2Config::compile),
       Memory(
           f.Bool("compile_loss", &Fsdp2Config::compile_loss),
           "torchtitan 9dec370, its published benchmarks; since bbb1b616e (2025-04) compile also "
           "compiles the loss: set true",
           IsCompiledFsdp2)},
      true};
}

// A library version "MAJOR.MINOR[.PATCH]" (digits only), e.g. memtune.versions.nccl.
FieldSpec VersionField(const char* name, std::string VersionsConfig::*member) {
  return {name,
          [member](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
            if (!n.IsScalar())
              return WrongType(n, p, "a version", "MAJOR.MINOR[.PATCH], e.g. 2.27.7");
            const std::string v = n.Scalar();
            int parts = 0;
            bool ok = !v.empty() && v.front() != '.' && v.back() != '.';
            for (std::size_t i = 0; ok && i < v.size(); ++i) {
              if (v[i] == '.') {
                ok = v[i - 1] != '.';
                ++parts;
              } else {
                ok = std::isdigit(static_cast<unsigned char>(v[i])) != 0;
              }
            }
            if (!ok || parts < 1 || parts > 2 || v.size() > 16) {
              return InvalidConfig(p, p + " = '" + v + "' is not a version",
                                   "write MAJOR.MINOR[.PATCH], e.g. 2.27.7");
            }
            j.memtune.versions.*member = v;
            return OkStatus();
          },
          [member](const Job& j) {
            const std::string& v = j.memtune.versions.*member;
            return v.empty() ? Json(nullptr) : Json(v);
          }};
}

SectionSpec BuildVersions() {
  return {"memtune.versions",
          {VersionField("nccl", &VersionsConfig::nccl),
           VersionField("megatron_core", &VersionsConfig::megatron_core),
           VersionField("transformer_engine", &VersionsConfig::transformer_engine),
           VersionField("torch", &VersionsConfig::torch)},
          true};
}

SectionSpec BuildMemtune() {
  const auto m = Bind<MemtuneBase>([](JobSpec& j) -> MemtuneBase& { return j.memtune; },
                                   [](const Job& j) -> const MemtuneBase& { return j.memtune; });
  const DerivedBinder<MemtuneSpec, MemtuneSection> derived{
      [](JobSpec& j) -> MemtuneSpec& { return j.memtune; },
      [](const Job& j) -> const MemtuneSection& { return j.memtune; }};
  FieldSpec fsdp2{"fsdp2", nullptr, nullptr};
  fsdp2.subsection = &Fsdp2Table();
  FieldSpec versions{"versions", nullptr, nullptr};
  versions.subsection = &VersionsTable();
  return {
      "memtune",
      {m.Choice("framework", &MemtuneSection::framework,
                {{"megatron", Framework::kMegatron}, {"fsdp2", Framework::kFsdp2}}),
       Memory(derived.Int("world_size", &MemtuneSpec::world_size, &MemtuneSection::world_size, 1,
                          kMaxWorld),
              "tensor * pipeline * context parallel sizes (data-parallel size 1)"),
       GpuField(), GpuMemoryField(),
       m.Int("gpus_per_node", &MemtuneSection::gpus_per_node, 1, 1024), EnvField(), fsdp2, versions,
       Memory(m.Choice("optimizer_implementation", &MemtuneSection::optimizer_implementation,
                       {{"fused", OptimizerImpl::kFused},
                        {"foreach", OptimizerImpl::kForeach},
                        {"for_loop", OptimizerImpl::kForLoop}}),
              "TE's FusedAdam (Megatron's first choice)"),
       Memory(m.OptDouble("moe_routing_spread", &MemtuneSection::moe_routing_spread, 0, 4),
              "0.2 for a learned router, 0 with model.moe_router_force_load_balancing",
              IsMegatronMoe),
       m.Text("recipe", &MemtuneSection::recipe), TorchtitanField()},
      true};
}

}  // namespace

const SectionSpec& Fsdp2Table() {
  static const SectionSpec kSection = BuildFsdp2();
  return kSection;
}
const SectionSpec& VersionsTable() {
  static const SectionSpec kSection = BuildVersions();
  return kSection;
}
const SectionSpec& TrainTable() {
  static const SectionSpec kSection = BuildTrain();
  return kSection;
}
const SectionSpec& OptimizerTable() {
  static const SectionSpec kSection = BuildOptimizer();
  return kSection;
}
const SectionSpec& DdpTable() {
  static const SectionSpec kSection = BuildDdp();
  return kSection;
}
const SectionSpec& DatasetTable() {
  static const SectionSpec kSection = BuildDataset();
  return kSection;
}
const SectionSpec& PeftTable() {
  static const SectionSpec kSection = BuildPeft();
  return kSection;
}
const SectionSpec& MemtuneTable() {
  static const SectionSpec kSection = BuildMemtune();
  return kSection;
}

}  // namespace memtune::model::internal
