// Data-parallel sharding rules: DDP overlap prerequisites, distributed-optimizer instances,
// and torchtitan-style FSDP2 jobs (shard degree, activation checkpointing, Megatron-only
// levers that FSDP2 ignores).
#include "model/checks_internal.h"

namespace memtune::model::checks {
namespace {

constexpr const char* kShard = "memtune.fsdp2.shard_degree";

Violations OverlapParamGatherShard(const Job& job) {
  const auto& d = job.ddp;
  if (!d.overlap_param_gather || d.use_distributed_optimizer || d.use_megatron_fsdp ||
      job.optimizer.use_distributed_optimizer) {
    return {};
  }
  return {Violation{{{"ddp.overlap_param_gather", "true"},
                     {"ddp.use_distributed_optimizer", "false"},
                     {"ddp.use_megatron_fsdp", "false"}},
                    "--overlap-param-gather only supported with distributed optimizer, megatron "
                    "fsdp, or dist_muon",
                    "set use_distributed_optimizer: true, or ddp.overlap_param_gather: false"}};
}

Violations OverlapParamGatherGrad(const Job& job) {
  const auto& d = job.ddp;
  if (!d.overlap_param_gather || d.overlap_grad_reduce) return {};
  return {Violation{{{"ddp.overlap_param_gather", "true"}, {"ddp.overlap_grad_reduce", "false"}},
                    "Must use --overlap-param-gather with --overlap-grad-reduce",
                    "set ddp.overlap_grad_reduce: true"}};
}

// MCore parallel_state.initialize_model_parallel (partial distributed optimizer).
Violations DistOptInstances(const Job& job) {
  if (!SizesValid(job)) return {};
  const int instances = job.ddp.num_distributed_optimizer_instances;
  const std::int64_t dp_cp =
      static_cast<std::int64_t>(DataParallelSize(job)) * job.model.context_parallel_size;
  if (instances >= 1 && dp_cp % instances == 0) return {};
  return {
      Violation{{{"ddp.num_distributed_optimizer_instances", Str(instances)},
                 {"memtune.world_size", Str(EffectiveWorldSize(job))}},
                "Data parallel size should be divisible by partial DistOpt shard factor: "
                "DP*CP = " +
                    Str(dp_cp) + ", instances = " + Str(instances),
                "set num_distributed_optimizer_instances to one of: " + Divisors(dp_cp, 1, dp_cp)}};
}

// torchtitan ParallelDims._validate: dp_replicate * dp_shard * cp * tp * pp == world.
Violations ShardDegree(const Job& job) {
  if (!SizesValid(job)) return {};
  const auto& m = job.model;
  const std::int64_t shard = job.memtune.fsdp2.shard_degree;
  const std::int64_t world = EffectiveWorldSize(job);
  const std::int64_t model = static_cast<std::int64_t>(m.tensor_model_parallel_size) *
                             m.pipeline_model_parallel_size * m.context_parallel_size;
  if (shard < 0) {
    return {One(kShard, Str(shard), "shard_degree must be >= 1 (or 0 for world / (TP*PP*CP))",
                "set memtune.fsdp2.shard_degree: 0")};
  }
  const std::int64_t grid = (shard == 0 ? 1 : shard) * model;
  if (world % grid == 0) return {};
  return {Violation{
      {{kShard, Str(shard)},
       {"memtune.world_size", Str(world)},
       {"model.tensor_model_parallel_size", Str(m.tensor_model_parallel_size)},
       {"model.pipeline_model_parallel_size", Str(m.pipeline_model_parallel_size)},
       {"model.context_parallel_size", Str(m.context_parallel_size)}},
      "Invalid parallel dims: dp_shard(" + Str(shard) + ") * cp(" + Str(m.context_parallel_size) +
          ") * tp(" + Str(m.tensor_model_parallel_size) + ") * pp(" +
          Str(m.pipeline_model_parallel_size) + ") = " + Str(grid) +
          " does not divide WORLD_SIZE(" + Str(world) + "), so dp_replicate is not an integer",
      "set memtune.fsdp2.shard_degree to a divisor of " +
          (world % model == 0 ? Str(world / model) : std::string("world/(TP*PP*CP)")) +
          " (0 = all of it)"}};
}

// torchtitan compiles the loss only when it compiles the model (components/loss.py
// build_cross_entropy_loss: `if job_config.compile...: loss_fn = torch.compile(loss_fn)`).
Violations CompileLoss(const Job& job) {
  const auto& c = job.memtune.fsdp2;
  if (!c.compile_loss || c.compile) return {};
  return {Violation{{{"memtune.fsdp2.compile_loss", "true"}, {"memtune.fsdp2.compile", "false"}},
                    "torchtitan compiles the loss only together with the model",
                    "set memtune.fsdp2.compile: true, or compile_loss: false"}};
}

// FSDP2 jobs take their memory levers from memtune.fsdp2; the Megatron fields below do not
// apply to a torchtitan run and memtune ignores them.
Violations MegatronLeversIgnored(const Job& job) {
  const auto& m = job.model;
  Fields fields;
  if (m.recompute_granularity != RecomputeGranularity::kNone) {
    fields.emplace_back(
        "model.recompute_granularity",
        m.recompute_granularity == RecomputeGranularity::kFull ? "full" : "selective");
  }
  if (m.cpu_offloading) fields.emplace_back("model.cpu_offloading", "true");
  if (m.fine_grained_activation_offloading) {
    fields.emplace_back("model.fine_grained_activation_offloading", "true");
  }
  if (m.virtual_pipeline_model_parallel_size) {
    fields.emplace_back("model.virtual_pipeline_model_parallel_size",
                        Opt(m.virtual_pipeline_model_parallel_size));
  }
  if (m.cuda_graph_impl != CudaGraphImpl::kNone)
    fields.emplace_back("model.cuda_graph_impl", NameOf(m.cuda_graph_impl));
  if (job.ddp.use_megatron_fsdp) fields.emplace_back("ddp.use_megatron_fsdp", "true");
  // PEFT and Megatron's FP8/FP4 training: the fsdp2 estimate is full bf16 training (its
  // float8 lever is memtune.fsdp2.float8); these changed nothing, without a word.
  if (job.peft) fields.emplace_back("peft", NameOf(job.peft->method));
  if (m.fp8 != Fp8Format::kNone) fields.emplace_back("model.fp8", NameOf(m.fp8));
  if (m.fp4 != Fp4Format::kNone) fields.emplace_back("model.fp4", NameOf(m.fp4));
  if (fields.empty()) return {};
  return {Violation{fields, "framework fsdp2 ignores these Megatron settings",
                    "use memtune.fsdp2 (activation_checkpoint, reshard_after_forward, ...) or "
                    "framework: megatron"}};
}

constexpr Rule kRules[] = {
    {{"ddp.overlap-param-gather-sharded", Severity::kError, RuleScope::kMegatron,
      "overlap_param_gather requires the distributed optimizer or Megatron-FSDP",
      "use_distributed_optimizer: true", kMlmArgs},
     OverlapParamGatherShard},
    {{"ddp.overlap-param-gather-grad-reduce", Severity::kError, RuleScope::kMegatron,
      "overlap_param_gather requires overlap_grad_reduce", "ddp.overlap_grad_reduce: true",
      kMlmArgs},
     OverlapParamGatherGrad},
    {{"ddp.dist-opt-instances", Severity::kError, RuleScope::kMegatron,
      "(DP*CP) % num_distributed_optimizer_instances == 0", "choose a divisor of DP*CP",
      "MCore parallel_state.initialize_model_parallel"},
     DistOptInstances},
    {{"fsdp.shard-degree", Severity::kError, RuleScope::kFsdp2,
      "world_size % (shard_degree*TP*PP*CP) == 0 (dp_replicate is an integer)",
      "choose a shard_degree dividing world/(TP*PP*CP)", "torchtitan ParallelDims._validate"},
     ShardDegree},
    {{"fsdp.compile-loss", Severity::kError, RuleScope::kFsdp2,
      "compile_loss needs compile (torchtitan compiles the loss with the model)",
      "set compile: true or compile_loss: false",
      "torchtitan components/loss.py build_cross_entropy_loss"},
     CompileLoss},
    {{"fsdp.megatron-levers-ignored", Severity::kWarning, RuleScope::kFsdp2,
      "Megatron recompute/offload/VPP/CUDA-graph/Megatron-FSDP/PEFT/FP8/FP4 fields do not apply to "
      "FSDP2",
      "use memtune.fsdp2 fields", "memtune job format (framework: fsdp2)"},
     MegatronLeversIgnored},
};

}  // namespace

std::span<const Rule> FsdpRules() { return kRules; }

}  // namespace memtune::model::checks
