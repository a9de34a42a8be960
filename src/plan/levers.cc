// The planner's search space: enumeration, application to a job, and the field changes.
#include "plan/levers.h"

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>

namespace memtune::plan {
namespace {

bool Kept(const std::vector<std::string>& keep, const char* field) {
  return std::find(keep.begin(), keep.end(), field) != keep.end();
}

std::vector<int> PowersOfTwoUpTo(int limit) {
  std::vector<int> out;
  for (int v = 1; v <= limit; v *= 2) out.push_back(v);
  return out;
}

std::vector<int> Divisors(int n, int limit) {
  std::vector<int> out;
  for (int d = 1; d <= n && d <= limit; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

// Interleaving depths that split every stage's layer slots evenly (MCore requires it without
// an explicit layout), plus none.
std::vector<int> VppChoices(const model::Job& job, int pp) {
  if (pp <= 1) return {0};
  const model::ModelConfig& m = job.model;
  const int slots = static_cast<int>(m.num_layers) +
                    (m.account_for_embedding_in_pipeline_split ? 1 : 0) +
                    (m.account_for_loss_in_pipeline_split ? 1 : 0);
  std::vector<int> out = {0};
  for (int v = 2; v <= 16; ++v) {
    if (slots % (pp * v) == 0) out.push_back(v);
  }
  return out;
}

bool Selective(const model::Job& job) {
  return job.model.recompute_granularity == model::RecomputeGranularity::kSelective;
}

const char* GranularityName(model::RecomputeGranularity g) {
  switch (g) {
    case model::RecomputeGranularity::kSelective:
      return "selective";
    case model::RecomputeGranularity::kFull:
      return "full";
    case model::RecomputeGranularity::kNone:
      break;
  }
  return nullptr;
}

const char* MethodName(model::RecomputeMethod m) {
  switch (m) {
    case model::RecomputeMethod::kUniform:
      return "uniform";
    case model::RecomputeMethod::kBlock:
      return "block";
    case model::RecomputeMethod::kNone:
      break;
  }
  return nullptr;
}

nlohmann::json OrNull(const char* name) { return name ? nlohmann::json(name) : nlohmann::json(); }

template <typename T>
nlohmann::json OrNull(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

using Getter = std::function<nlohmann::json(const model::Job&)>;

// The fields a plan may change, in the order changes are listed.
const std::vector<std::pair<const char*, Getter>>& ChangeFields() {
  static const std::vector<std::pair<const char*, Getter>> kFields = {
      {"memtune.world_size",
       [](const model::Job& j) { return nlohmann::json(j.memtune.world_size); }},
      {"model.tensor_model_parallel_size",
       [](const model::Job& j) { return nlohmann::json(j.model.tensor_model_parallel_size); }},
      {"model.pipeline_model_parallel_size",
       [](const model::Job& j) { return nlohmann::json(j.model.pipeline_model_parallel_size); }},
      {"model.virtual_pipeline_model_parallel_size",
       [](const model::Job& j) { return OrNull(j.model.virtual_pipeline_model_parallel_size); }},
      {"model.context_parallel_size",
       [](const model::Job& j) { return nlohmann::json(j.model.context_parallel_size); }},
      {"model.expert_model_parallel_size",
       [](const model::Job& j) { return nlohmann::json(j.model.expert_model_parallel_size); }},
      {"model.pipeline_model_parallel_layout",
       [](const model::Job& j) {
         return j.model.pipeline_model_parallel_layout.empty()
                    ? nlohmann::json()
                    : nlohmann::json(j.model.pipeline_model_parallel_layout);
       }},
      {"model.num_layers_in_first_pipeline_stage",
       [](const model::Job& j) { return OrNull(j.model.num_layers_in_first_pipeline_stage); }},
      {"model.num_layers_in_last_pipeline_stage",
       [](const model::Job& j) { return OrNull(j.model.num_layers_in_last_pipeline_stage); }},
      {"model.sequence_parallel",
       [](const model::Job& j) { return nlohmann::json(j.model.sequence_parallel); }},
      {"memtune.fsdp2.pipeline_schedule",
       [](const model::Job& j) {
         return j.memtune.framework == model::Framework::kFsdp2
                    ? nlohmann::json(std::string(model::NameOf(j.memtune.fsdp2.pipeline_schedule)))
                    : nlohmann::json();
       }},
      {"memtune.fsdp2.reshard_after_forward",
       [](const model::Job& j) {
         return j.memtune.framework == model::Framework::kFsdp2
                    ? nlohmann::json(j.memtune.fsdp2.reshard_after_forward)
                    : nlohmann::json();
       }},
      {"model.tp_comm_overlap",
       [](const model::Job& j) { return nlohmann::json(j.model.tp_comm_overlap); }},
      {"model.recompute_granularity",
       [](const model::Job& j) { return OrNull(GranularityName(j.model.recompute_granularity)); }},
      {"model.recompute_method",
       [](const model::Job& j) { return OrNull(MethodName(j.model.recompute_method)); }},
      {"model.recompute_num_layers",
       [](const model::Job& j) { return OrNull(j.model.recompute_num_layers); }},
      {"model.recompute_modules",
       [](const model::Job& j) {
         return Selective(j) ? nlohmann::json(j.model.recompute_modules) : nlohmann::json();
       }},
      {"train.micro_batch_size",
       [](const model::Job& j) { return nlohmann::json(j.train.micro_batch_size); }},
      {"optimizer.optimizer_cpu_offload",
       [](const model::Job& j) { return nlohmann::json(j.optimizer.optimizer_cpu_offload); }},
      {"optimizer.optimizer_offload_fraction",
       [](const model::Job& j) {
         return j.optimizer.optimizer_cpu_offload
                    ? nlohmann::json(j.optimizer.optimizer_offload_fraction)
                    : nlohmann::json();
       }},
      {"peft.sequence_parallel_input_regather",
       [](const model::Job& j) {
         return j.peft ? nlohmann::json(j.peft->sequence_parallel_input_regather)
                       : nlohmann::json();
       }},
      {"memtune.env.PYTORCH_CUDA_ALLOC_CONF",
       [](const model::Job& j) {
         auto it = j.memtune.env.find("PYTORCH_CUDA_ALLOC_CONF");
         return it == j.memtune.env.end() ? nlohmann::json() : nlohmann::json(it->second);
       }},
  };
  return kFields;
}

RecomputeChoice Selective(std::string name, std::vector<std::string> modules) {
  RecomputeChoice c;
  c.name = std::move(name);
  c.granularity = model::RecomputeGranularity::kSelective;
  c.modules = std::move(modules);
  return c;
}

}  // namespace

std::vector<RecomputeChoice> RecomputeChoices(const model::Job& job) {
  std::vector<RecomputeChoice> out;
  RecomputeChoice own;
  own.name = "the job's own";
  own.granularity = job.model.recompute_granularity;
  own.method = job.model.recompute_method;
  own.num_layers = job.model.recompute_num_layers.value_or(0);
  own.modules = job.model.recompute_modules;
  out.push_back(own);
  if (job.memtune.framework == model::Framework::kFsdp2) return out;  // torchtitan: its own AC
  RecomputeChoice none;
  none.name = "no recompute";
  out.push_back(none);
  // MCore's selective modules (TransformerConfig.recompute_modules), the playbook's ladder.
  out.push_back(Selective("selective core_attn", {"core_attn"}));
  out.push_back(Selective("selective core_attn + layernorm", {"core_attn", "layernorm"}));
  const bool moe = job.model.num_moe_experts.value_or(0) > 0;
  if (moe) {
    out.push_back(Selective("selective moe_act", {"moe_act"}));
    out.push_back(Selective("selective core_attn + moe_act", {"core_attn", "moe_act"}));
    out.push_back(Selective("selective moe", {"moe"}));
  }
  if (!moe || job.model.moe_layer_freq != std::vector<int>{1}) {
    out.push_back(Selective("selective mlp", {"mlp"}));
    out.push_back(Selective("selective core_attn + mlp", {"core_attn", "mlp"}));
  }
  RecomputeChoice full;
  full.name = "full recompute";
  full.granularity = model::RecomputeGranularity::kFull;
  full.method = model::RecomputeMethod::kUniform;
  full.num_layers = 1;
  out.push_back(full);
  // Drop the settings equal to the job's own (index 0 stays).
  auto same = [&](const RecomputeChoice& c) {
    if (c.granularity != own.granularity) return false;
    if (c.granularity == model::RecomputeGranularity::kNone) return true;
    if (c.granularity == model::RecomputeGranularity::kFull) {
      return c.method == own.method && c.num_layers == own.num_layers;
    }
    return c.modules == own.modules;
  };
  out.erase(std::remove_if(out.begin() + 1, out.end(), same), out.end());
  return out;
}

Levers CurrentLevers(const model::Job& job) {
  const model::ModelConfig& m = job.model;
  Levers l;
  l.tp = m.tensor_model_parallel_size;
  l.pp = m.pipeline_model_parallel_size;
  l.vpp = m.virtual_pipeline_model_parallel_size.value_or(0);
  l.cp = m.context_parallel_size;
  l.ep = m.expert_model_parallel_size;
  l.mbs = static_cast<int>(job.train.micro_batch_size);
  l.optimizer_offload =
      job.optimizer.optimizer_cpu_offload ? job.optimizer.optimizer_offload_fraction : 0;
  l.regather = job.peft && job.peft->sequence_parallel_input_regather;
  return l;
}

std::vector<Levers> EnumerateLevers(const model::Job& job, int gpus,
                                    const std::vector<std::string>& keep,
                                    const std::vector<RecomputeChoice>& recompute) {
  const model::ModelConfig& m = job.model;
  const Levers now = CurrentLevers(job);
  auto options = [&](const char* field, std::vector<int> values, int current) {
    if (Kept(keep, field)) return std::vector<int>{current};
    if (std::find(values.begin(), values.end(), current) == values.end()) values.push_back(current);
    return values;
  };
  std::vector<int> tps;
  for (int tp : PowersOfTwoUpTo(std::min(8, std::max(1, job.memtune.gpus_per_node)))) {
    if (m.num_attention_heads % tp == 0 && m.num_query_groups % tp == 0) tps.push_back(tp);
  }
  tps = options("model.tensor_model_parallel_size", tps, now.tp);
  std::vector<int> cps;
  for (int cp : {1, 2, 4, 8}) {
    if (m.seq_length % (2 * cp) == 0) cps.push_back(cp);
  }
  cps = options("model.context_parallel_size", cps, now.cp);
  const std::int64_t experts = m.num_moe_experts.value_or(0);
  const std::int64_t gbs = job.train.global_batch_size;
  std::vector<Levers> out;
  for (int tp : tps) {
    for (int cp : cps) {
      if (gpus % (tp * cp) != 0) continue;
      const int rest = gpus / (tp * cp);
      std::vector<int> pps = options("model.pipeline_model_parallel_size",
                                     Divisors(rest, static_cast<int>(m.num_layers)), now.pp);
      for (int pp : pps) {
        if (pp <= 0 || rest % pp != 0) continue;
        const int dp = rest / pp;
        std::vector<int> vpps = Kept(keep, "model.virtual_pipeline_model_parallel_size")
                                    ? std::vector<int>{now.vpp}
                                    : VppChoices(job, pp);
        if (pp == now.pp && std::find(vpps.begin(), vpps.end(), now.vpp) == vpps.end())
          vpps.push_back(now.vpp);
        std::vector<int> eps = {1};
        if (experts > 0) {
          eps.clear();
          const int etp = m.expert_tensor_parallel_size.value_or(tp) == now.tp
                              ? tp
                              : m.expert_tensor_parallel_size.value_or(tp);
          for (int ep : PowersOfTwoUpTo(64)) {
            if (experts % ep == 0 && (gpus / pp) % (ep * etp) == 0) eps.push_back(ep);
          }
          eps = options("model.expert_model_parallel_size", eps, now.ep);
        }
        std::vector<int> mbss = options("train.micro_batch_size", {1, 2, 4}, now.mbs);
        for (int vpp : vpps) {
          for (int ep : eps) {
            for (int mbs : mbss) {
              if (gbs % (static_cast<std::int64_t>(mbs) * dp) != 0) continue;
              const int recompute_count = Kept(keep, "model.recompute_granularity")
                                              ? 1
                                              : static_cast<int>(recompute.size());
              for (int r = 0; r < recompute_count; ++r) {
                Levers l;
                l.tp = tp;
                l.pp = pp;
                l.vpp = vpp;
                l.cp = cp;
                l.ep = ep;
                l.mbs = mbs;
                l.recompute = r;
                l.optimizer_offload = now.optimizer_offload;
                l.regather = now.regather;
                out.push_back(l);
                // The expensive levers, tried on the job's own recompute only: optimizer
                // CPU offload (Megatron's HybridDeviceOptimizer) and LoRA input re-gather.
                if (r != 0) continue;
                const bool megatron = job.memtune.framework == model::Framework::kMegatron;
                if (megatron && !Kept(keep, "optimizer.optimizer_cpu_offload") &&
                    now.optimizer_offload == 0) {
                  for (double f : {0.5, 1.0}) {
                    Levers o = l;
                    o.optimizer_offload = f;
                    out.push_back(o);
                  }
                }
                if (job.peft && tp > 1 && !now.regather &&
                    !Kept(keep, "peft.sequence_parallel_input_regather")) {
                  Levers g = l;
                  g.regather = true;
                  out.push_back(g);
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

std::vector<std::pair<std::string, Levers>> PlaybookAlternatives(
    const model::Job& job, int gpus, const std::vector<std::string>& keep,
    const std::vector<RecomputeChoice>& recompute) {
  const Levers now = CurrentLevers(job);
  std::vector<std::pair<std::string, Levers>> out;
  const int dp = gpus / std::max(1, now.tp * now.pp * now.cp);
  if (!Kept(keep, "model.tensor_model_parallel_size") && dp % 2 == 0 && now.tp * 2 <= 8) {
    Levers l = now;
    l.tp *= 2;
    out.emplace_back("more TP (DP halves)", l);
  }
  if (!Kept(keep, "model.pipeline_model_parallel_size") && dp % 2 == 0) {
    Levers l = now;
    l.pp *= 2;
    out.emplace_back("more PP (DP halves)", l);
  }
  if (!Kept(keep, "model.virtual_pipeline_model_parallel_size") && now.pp > 1) {
    Levers l = now;
    l.vpp = now.vpp > 0 ? now.vpp * 2 : 2;
    out.emplace_back("deeper interleaving (VPP)", l);
  }
  if (!Kept(keep, "model.recompute_granularity")) {
    for (std::size_t r = 1; r < recompute.size(); ++r) {
      Levers l = now;
      l.recompute = static_cast<int>(r);
      out.emplace_back(recompute[r].name, l);
    }
  }
  if (job.memtune.framework == model::Framework::kMegatron && now.optimizer_offload == 0 &&
      !Kept(keep, "optimizer.optimizer_cpu_offload")) {
    for (double f : {0.5, 1.0}) {
      Levers l = now;
      l.optimizer_offload = f;
      out.emplace_back(f < 1 ? "optimizer CPU offload (half)" : "optimizer CPU offload (all)", l);
    }
  }
  if (job.peft && now.tp > 1 && !now.regather &&
      !Kept(keep, "peft.sequence_parallel_input_regather")) {
    Levers l = now;
    l.regather = true;
    out.emplace_back("LoRA input re-gather", l);
  }
  return out;
}

model::Job ApplyLevers(const model::Job& job, const Levers& l, int gpus,
                       const std::vector<RecomputeChoice>& recompute) {
  model::Job j = job;
  model::ModelConfig& m = j.model;
  const int old_tp = m.tensor_model_parallel_size;
  // torchtitan's reshard_after_forward policy "default" is `not pp_enabled`: a plan that
  // turns pipeline parallelism on or off for an FSDP2 job takes the default with it.
  if (j.memtune.framework == model::Framework::kFsdp2 &&
      (l.pp > 1) != (m.pipeline_model_parallel_size > 1)) {
    j.memtune.fsdp2.reshard_after_forward = l.pp == 1;
  }
  // Several stages per rank run torchtitan's Interleaved1F1B; one, its default 1F1B.
  if (j.memtune.framework == model::Framework::kFsdp2) {
    auto& schedule = j.memtune.fsdp2.pipeline_schedule;
    const bool interleaved = schedule == model::Fsdp2PipelineSchedule::kInterleaved1F1B;
    if (l.vpp > 1 && !interleaved) schedule = model::Fsdp2PipelineSchedule::kInterleaved1F1B;
    if (l.vpp <= 1 && interleaved) schedule = model::Fsdp2PipelineSchedule::k1F1B;
  }
  const bool layout_changed = l.pp != m.pipeline_model_parallel_size ||
                              l.vpp != m.virtual_pipeline_model_parallel_size.value_or(0);
  j.memtune.world_size = gpus;
  m.tensor_model_parallel_size = l.tp;
  m.pipeline_model_parallel_size = l.pp;
  m.virtual_pipeline_model_parallel_size =
      l.vpp > 0 ? std::optional<int>(l.vpp) : std::optional<int>();
  m.context_parallel_size = l.cp;
  m.expert_model_parallel_size = l.ep;
  if (m.expert_tensor_parallel_size.value_or(old_tp) == old_tp)
    m.expert_tensor_parallel_size = l.tp;
  if (layout_changed) {
    m.pipeline_model_parallel_layout.clear();
    m.num_layers_in_first_pipeline_stage.reset();
    m.num_layers_in_last_pipeline_stage.reset();
    m.microbatch_group_size_per_vp_stage = l.pp;
  }
  if (l.tp == 1) {
    m.sequence_parallel = false;
    m.tp_comm_overlap = false;
  } else if (old_tp == 1) {
    m.sequence_parallel = true;  // Megatron-LM and Bridge recipes pair TP with SP
  }
  j.train.micro_batch_size = l.mbs;
  if (l.recompute > 0 && l.recompute < static_cast<int>(recompute.size())) {
    const RecomputeChoice& c = recompute[l.recompute];
    m.recompute_granularity = c.granularity;
    m.recompute_method = c.method;
    m.recompute_num_layers = c.num_layers > 0 ? std::optional<int>(c.num_layers) : std::nullopt;
    if (c.granularity == model::RecomputeGranularity::kSelective) m.recompute_modules = c.modules;
  }
  j.optimizer.optimizer_cpu_offload = l.optimizer_offload > 0;
  if (l.optimizer_offload > 0) j.optimizer.optimizer_offload_fraction = l.optimizer_offload;
  if (j.peft) j.peft->sequence_parallel_input_regather = l.regather;
  return j;
}

std::vector<assess::FieldChange> JobChanges(const model::Job& from, const model::Job& to) {
  std::vector<assess::FieldChange> out;
  for (const auto& [field, get] : ChangeFields()) {
    const nlohmann::json a = get(from), b = get(to);
    if (a != b)
      out.push_back({field, b.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)});
  }
  return out;
}

std::vector<std::string> PlanFieldNames() {
  return {"model.tensor_model_parallel_size",
          "model.pipeline_model_parallel_size",
          "model.virtual_pipeline_model_parallel_size",
          "model.context_parallel_size",
          "model.expert_model_parallel_size",
          "train.micro_batch_size",
          "model.recompute_granularity",
          "optimizer.optimizer_cpu_offload",
          "peft.sequence_parallel_input_regather",
          "memtune.env.PYTORCH_CUDA_ALLOC_CONF"};
}

}  // namespace memtune::plan
