// CUDA-graph rules (impl, scopes, recompute interplay) and the allocator-environment rules
// (expandable segments with NCCL user buffers or CUDA graphs).
#include "memtune/alloc/env_config.h"
#include "model/checks_internal.h"

namespace memtune::model::checks {
namespace {

constexpr const char* kImpl = "model.cuda_graph_impl";
constexpr const char* kScope = "model.cuda_graph_scope";

bool Graphs(const ModelConfig& m) { return m.cuda_graph_impl != CudaGraphImpl::kNone; }
bool PerLayer(const ModelConfig& m) {
  return m.cuda_graph_impl == CudaGraphImpl::kLocal ||
         m.cuda_graph_impl == CudaGraphImpl::kTransformerEngine;
}
bool HasScope(const ModelConfig& m, std::string_view scope) {
  return Contains(m.cuda_graph_scope, scope);
}
// The whole layer is captured: full_iteration, or a per-layer impl with an empty scope
// (the deprecated "full" scope means the same).
bool WholeLayer(const ModelConfig& m) {
  return m.cuda_graph_impl == CudaGraphImpl::kFullIteration || m.cuda_graph_scope.empty() ||
         HasScope(m, "full");
}
bool AllMoe(const ModelConfig& m) {
  if (m.moe_layer_freq_is_list) {
    for (int flag : m.moe_layer_freq) {
      if (flag == 0) return false;
    }
    return true;
  }
  return m.moe_layer_freq.empty() || m.moe_layer_freq[0] == 1;
}
Fields ImplScope(const ModelConfig& m) {
  return {{kImpl, NameOf(m.cuda_graph_impl)}, {kScope, List(m.cuda_graph_scope)}};
}

// MCore cuda_graphs.py normalize_cuda_graph_modules (CudaGraphModule names).
Violations ScopeValid(const Job& job) {
  static const std::vector<std::string> kAllowed = {"attn",           "mlp",   "moe", "moe_router",
                                                    "moe_preprocess", "mamba", "full"};
  std::vector<std::string> invalid;
  for (const std::string& s : job.model.cuda_graph_scope) {
    if (!Contains(kAllowed, s)) invalid.push_back(s);
  }
  if (invalid.empty()) return {};
  return {One(kScope, List(job.model.cuda_graph_scope),
              "unknown cuda_graph_scope entries " + List(invalid) + "; allowed: " + List(kAllowed),
              "remove " + List(invalid) + " from cuda_graph_scope")};
}

Violations FullIterationScope(const Job& job) {
  const auto& m = job.model;
  if (m.cuda_graph_impl != CudaGraphImpl::kFullIteration || m.cuda_graph_scope.empty()) return {};
  return {Violation{ImplScope(m),
                    "cuda_graph_modules must be empty when cuda_graph_impl=\"full_iteration\"",
                    "set cuda_graph_scope: []"}};
}

Violations FullRecompute(const Job& job) {
  const auto& m = job.model;
  if (!Graphs(m) || m.recompute_granularity != RecomputeGranularity::kFull ||
      m.cuda_graph_impl == CudaGraphImpl::kFullIteration) {
    return {};
  }
  return {Violation{{{kImpl, NameOf(m.cuda_graph_impl)}, {"model.recompute_granularity", "full"}},
                    "full recompute is only supported with full iteration CUDA graph",
                    "set cuda_graph_impl: full_iteration (or none), or use selective recompute"}};
}

Violations MoeScopes(const Job& job) {
  const auto& m = job.model;
  if (!PerLayer(m)) return {};
  Violations out;
  if (HasScope(m, "moe") && HasScope(m, "moe_router")) {
    out.push_back(Violation{ImplScope(m),
                            "cuda_graph_modules must not contain both moe and moe_router",
                            "keep one of moe / moe_router in cuda_graph_scope"});
  }
  if (m.cuda_graph_impl == CudaGraphImpl::kTransformerEngine && HasScope(m, "moe_preprocess") &&
      !HasScope(m, "moe_router")) {
    out.push_back(Violation{ImplScope(m),
                            "moe_preprocess cuda graph is only supported with moe_router cuda "
                            "graph",
                            "add moe_router to cuda_graph_scope"});
  }
  const bool moe = m.num_moe_experts && *m.num_moe_experts > 1;
  if (!moe && (HasScope(m, "moe") || HasScope(m, "moe_router"))) {
    out.push_back(Violation{ImplScope(m), "moe cuda graph is only supported for MoE",
                            "remove moe / moe_router from cuda_graph_scope"});
  }
  if (moe && AllMoe(m) && HasScope(m, "mlp")) {
    out.push_back(Violation{ImplScope(m),
                            "mlp cuda graph is only supported for dense layers, but not found "
                            "in the model",
                            "remove mlp from cuda_graph_scope (use moe_router)"});
  }
  if (moe && HasScope(m, "moe") && !m.moe_expert_capacity_factor) {
    out.push_back(Violation{ImplScope(m), "moe cuda graph is only supported with drop-padding MoE",
                            "set moe_expert_capacity_factor with padding to capacity, or use "
                            "the moe_router scope"});
  }
  return out;
}

// Graphed recompute cannot draw random numbers: dropout inside a graphed, recomputed module.
Violations DropoutRecompute(const Job& job) {
  const auto& m = job.model;
  if (!Graphs(m) || m.recompute_granularity != RecomputeGranularity::kSelective) return {};
  Violations out;
  const bool whole = WholeLayer(m);
  if (m.attention_dropout != 0.0 && (whole || HasScope(m, "attn")) &&
      Contains(m.recompute_modules, "core_attn")) {
    Fields f = ImplScope(m);
    f.emplace_back("model.attention_dropout", Dec(m.attention_dropout));
    f.emplace_back("model.recompute_modules", List(m.recompute_modules));
    out.push_back(Violation{f,
                            "attention dropout is not supported with graphed attention "
                            "recomputation",
                            "set attention_dropout: 0, or remove core_attn from "
                            "recompute_modules"});
  }
  const bool mlp = (whole || HasScope(m, "mlp")) && Contains(m.recompute_modules, "mlp");
  const bool moe = (whole || HasScope(m, "moe")) && Contains(m.recompute_modules, "moe");
  if (m.hidden_dropout != 0.0 && (mlp || moe)) {
    Fields f = ImplScope(m);
    f.emplace_back("model.hidden_dropout", Dec(m.hidden_dropout));
    f.emplace_back("model.recompute_modules", List(m.recompute_modules));
    out.push_back(Violation{f, "hidden dropout is not supported with graphed MLP/MoE recomputation",
                            "set hidden_dropout: 0, or remove mlp/moe from recompute_modules"});
  }
  return out;
}

Violations MoeRecomputeRouter(const Job& job) {
  const auto& m = job.model;
  if (m.cuda_graph_impl != CudaGraphImpl::kTransformerEngine ||
      m.recompute_granularity != RecomputeGranularity::kSelective ||
      !Contains(m.recompute_modules, "moe") || !HasScope(m, "moe_router")) {
    return {};
  }
  return {Violation{ImplScope(m),
                    "moe recompute is not supported with moe_router CUDA graph with: "
                    "--cuda-graph-impl transformer_engine",
                    "remove moe from recompute_modules or moe_router from cuda_graph_scope"}};
}

Violations EpOverlapScope(const Job& job) {
  const auto& m = job.model;
  if (!m.overlap_moe_expert_parallel_comm ||
      m.cuda_graph_impl != CudaGraphImpl::kTransformerEngine ||
      (!HasScope(m, "moe") && !HasScope(m, "mlp"))) {
    return {};
  }
  Fields f = ImplScope(m);
  f.emplace_back("model.overlap_moe_expert_parallel_comm", "true");
  return {Violation{f,
                    "CUDA graph scope on moe and mlp is not supported with "
                    "overlap_moe_expert_parallel_comm",
                    "remove moe/mlp from cuda_graph_scope"}};
}

// The variable that turns expandable segments on, read as PyTorch (the default release)
// reads the launch environment (alloc::AllocatorConfigFromEnv), or "" when they are off or
// the config does not parse (the forecast reports that error).
std::string ExpandableVar(const Job& job) {
  auto env = alloc::AllocatorConfigFromEnv(job.memtune.env, alloc::kDefaultTorchVersion);
  if (!env || !env->config.expandable_segments) return "";
  return env->source_var;
}

// The launch environment's allocator config must parse as PyTorch parses it: PyTorch raises
// at the first CUDA allocation otherwise (e.g. expandable_segments:true, "=" for ":").
Violations AllocConfValid(const Job& job) {
  auto env =
      alloc::AllocatorConfigFromEnv(job.memtune.env, alloc::kDefaultTorchVersion, "memtune.env.");
  if (env) return {};
  const Error& e = env.error();
  const std::string var =
      e.field.substr(0, e.field.find(' ')).substr(std::string("memtune.env.").size());
  return {Violation{
      {{"memtune.env." + var, job.memtune.env.at(var)}},
      "PyTorch " + alloc::kDefaultTorchVersion.ToString() + " rejects " + var + ": " + e.message,
      e.hint.empty() ? "use PyTorch's spelling, e.g. expandable_segments:True" : e.hint}};
}

Violations ExpandableWithNcclUb(const Job& job) {
  const std::string var = ExpandableVar(job);
  if (var.empty() || !job.ddp.nccl_ub) return {};
  return {Violation{{{"memtune.env." + var, job.memtune.env.at(var)}, {"ddp.nccl_ub", "true"}},
                    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True is currently not "
                    "supported with nccl_ub due to compatibility issue with torch.cuda.MemPool "
                    "API (Megatron-Core raises it for PyTorch < 2.11)",
                    "remove expandable_segments:True from " + var + ", or set ddp.nccl_ub: false"}};
}

bool GraphRegisterOff(const Job& job) {
  auto it = job.memtune.env.find("NCCL_GRAPH_REGISTER");
  return it != job.memtune.env.end() && it->second == "0";
}

// MCore asserts it for transformer_engine graphs on every GPU (arguments.py and
// TECudaGraphHelper); the playbook requires it for every impl before Blackwell.
bool GraphRegisterRequired(const Job& job) {
  return job.model.cuda_graph_impl == CudaGraphImpl::kTransformerEngine ||
         !IsBlackwellGpu(job.memtune.gpu);
}

Violations GraphRegister(const Job& job, bool required) {
  const auto& m = job.model;
  const std::string var = ExpandableVar(job);
  if (!Graphs(m) || var.empty() || GraphRegisterOff(job)) return {};
  if (GraphRegisterRequired(job) != required) return {};
  return {
      Violation{{{kImpl, NameOf(m.cuda_graph_impl)},
                 {"memtune.env." + var, job.memtune.env.at(var)},
                 {"memtune.env.NCCL_GRAPH_REGISTER", job.memtune.env.count("NCCL_GRAPH_REGISTER")
                                                         ? job.memtune.env.at("NCCL_GRAPH_REGISTER")
                                                         : "(unset)"},
                 {"memtune.gpu", job.memtune.gpu.empty() ? "(unset)" : job.memtune.gpu}},
                "Setting NCCL_GRAPH_REGISTER=0 to avoid illegal memory access when using "
                "CUDA Graph with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                "add NCCL_GRAPH_REGISTER: \"0\" to memtune.env (and the launch environment)"}};
}
Violations GraphRegisterRequiredRule(const Job& job) { return GraphRegister(job, true); }
Violations GraphRegisterAdvisedRule(const Job& job) { return GraphRegister(job, false); }

constexpr Rule kRules[] = {
    {{"cudagraph.scope-valid", Severity::kError, RuleScope::kMegatron,
      "cuda_graph_scope entries are attn | mlp | moe | moe_router | moe_preprocess | mamba",
      "remove unknown scopes", "MCore cuda_graphs.normalize_cuda_graph_modules"},
     ScopeValid},
    {{"cudagraph.full-iteration-scope", Severity::kError, RuleScope::kMegatron,
      "full_iteration graphs take no scope", "cuda_graph_scope: []", kMcoreTransformer},
     FullIterationScope},
    {{"cudagraph.full-recompute", Severity::kError, RuleScope::kMegatron,
      "full recompute with CUDA graphs requires cuda_graph_impl: full_iteration",
      "full_iteration, or selective recompute", kMcoreTransformer},
     FullRecompute},
    {{"cudagraph.moe-scopes", Severity::kError, RuleScope::kMegatron,
      "moe/moe_router exclusive; moe_preprocess needs moe_router; moe scopes only for MoE; "
      "no mlp scope on an all-MoE model; moe scope only with drop-and-pad",
      "fix cuda_graph_scope", kMcoreTransformer},
     MoeScopes},
    {{"cudagraph.dropout-recompute", Severity::kError, RuleScope::kMegatron,
      "no dropout inside a graphed module that is selectively recomputed",
      "dropout 0, or recompute other modules", kMcoreTransformer},
     DropoutRecompute},
    {{"cudagraph.moe-recompute-router", Severity::kError, RuleScope::kMegatron,
      "TE graphs: moe recompute excludes the moe_router scope", "drop one of them",
      kMcoreTransformer},
     MoeRecomputeRouter},
    {{"cudagraph.ep-overlap-scope", Severity::kError, RuleScope::kMegatron,
      "TE graphs with EP overlap exclude the moe and mlp scopes", "drop moe/mlp scopes",
      kMcoreTransformer},
     EpOverlapScope},
    {{"alloc.conf-valid", Severity::kError, RuleScope::kAll,
      "PYTORCH_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF parse as PyTorch parses them",
      "fix the option PyTorch names",
      "PyTorch c10/core/AllocatorConfig.cpp, c10/cuda/CUDAAllocatorConfig.cpp parseArgs"},
     AllocConfValid},
    {{"alloc.expandable-nccl-ub", Severity::kError, RuleScope::kAll,
      "expandable_segments:True is incompatible with NCCL user buffers (ddp.nccl_ub)",
      "drop expandable_segments or nccl_ub", "MCore DistributedDataParallelConfig.__post_init__"},
     ExpandableWithNcclUb},
    {{"alloc.cuda-graph-nccl-register", Severity::kError, RuleScope::kMegatron,
      "CUDA graphs + expandable_segments need NCCL_GRAPH_REGISTER=0 (TE graphs always; any "
      "impl before Blackwell)",
      "NCCL_GRAPH_REGISTER: \"0\" in memtune.env",
      "Megatron-LM arguments.py; MCore TECudaGraphHelper; memory-tuning playbook", kMemoryNeutral},
     GraphRegisterRequiredRule},
    {{"alloc.cuda-graph-nccl-register-blackwell", Severity::kWarning, RuleScope::kMegatron,
      "local/full_iteration CUDA graphs + expandable_segments on Blackwell: "
      "NCCL_GRAPH_REGISTER=0 advised",
      "NCCL_GRAPH_REGISTER: \"0\" in memtune.env", "memory-tuning playbook"},
     GraphRegisterAdvisedRule},
};

}  // namespace

std::span<const Rule> CudaGraphRules() { return kRules; }

}  // namespace memtune::model::checks
