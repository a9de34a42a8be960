// Pipeline rules: layer split over PP (even, uneven first/last, account-for-embedding/loss,
// the layout string), virtual pipeline prerequisites, interleaved micro-batch grouping.
#include "memtune/model/pipeline_layout.h"
#include "model/checks_internal.h"

namespace memtune::model::checks {
namespace {

constexpr const char* kPp = "model.pipeline_model_parallel_size";
constexpr const char* kVpp = "model.virtual_pipeline_model_parallel_size";
constexpr const char* kLayout = "model.pipeline_model_parallel_layout";
constexpr const char* kFirst = "model.num_layers_in_first_pipeline_stage";
constexpr const char* kLast = "model.num_layers_in_last_pipeline_stage";

bool Uneven(const ModelConfig& m) {
  return m.num_layers_in_first_pipeline_stage || m.num_layers_in_last_pipeline_stage;
}
bool Account(const ModelConfig& m) {
  return m.account_for_embedding_in_pipeline_split || m.account_for_loss_in_pipeline_split;
}
// Layers the even split divides: decoder layers plus the embedding/loss "layers".
std::int64_t SplitLayers(const ModelConfig& m) {
  return m.num_layers + (m.account_for_embedding_in_pipeline_split ? 1 : 0) +
         (m.account_for_loss_in_pipeline_split ? 1 : 0);
}
std::string SplitLayersText(const ModelConfig& m) {
  std::string text = "num_layers";
  if (m.account_for_embedding_in_pipeline_split) text += " + 1 (embedding)";
  if (m.account_for_loss_in_pipeline_split) text += " + 1 (loss)";
  return text + " = " + Str(SplitLayers(m));
}

// MCore parallel_state.initialize_model_parallel.
Violations VppNeedsPp(const Job& job) {
  const auto& m = job.model;
  if (!m.virtual_pipeline_model_parallel_size || m.pipeline_model_parallel_size != 1) return {};
  return {Violation{{{kVpp, Opt(m.virtual_pipeline_model_parallel_size)}, {kPp, "1"}},
                    "pipeline-model-parallel size should be greater than 1 with interleaved "
                    "schedule",
                    "set virtual_pipeline_model_parallel_size: null, or "
                    "pipeline_model_parallel_size > 1"}};
}

Violations VppWithPp2(const Job& job) {
  const auto& m = job.model;
  if (!m.virtual_pipeline_model_parallel_size || m.pipeline_model_parallel_size != 2) return {};
  return {Violation{{{kVpp, Opt(m.virtual_pipeline_model_parallel_size)}, {kPp, "2"}},
                    "Megatron-LM rejects the interleaved schedule with "
                    "pipeline_model_parallel_size 2 unless overlap_p2p_comm is on (multiple p2p "
                    "sends and recvs between the same 2 ranks per communication batch); "
                    "Megatron-Bridge accepts it",
                    "with Megatron-LM, pass --overlap-p2p-comm or use PP > 2"}};
}

// Megatron-LM arguments.py; MCore TransformerConfig (account-for split) and
// get_num_layers_to_build (even split).
Violations EvenLayers(const Job& job) {
  const auto& m = job.model;
  const int pp = m.pipeline_model_parallel_size;
  if (pp <= 1 || m.num_layers < 1 || !m.pipeline_model_parallel_layout.empty() || Uneven(m)) {
    return {};
  }
  const std::int64_t n = SplitLayers(m);
  if (n % pp == 0) return {};
  return {Violation{
      {{"model.num_layers", Str(m.num_layers)}, {kPp, Str(pp)}},
      SplitLayersText(m) + " must be divisible by pipeline_model_parallel_size (" + Str(pp) + ")",
      "set pipeline_model_parallel_size to one of: " + Divisors(n, 1, 64) +
          "; or split unevenly with num_layers_in_first_pipeline_stage / "
          "num_layers_in_last_pipeline_stage"}};
}

Violations EvenLayersVpp(const Job& job) {
  const auto& m = job.model;
  const int pp = m.pipeline_model_parallel_size;
  const int vpp = EffectiveVpp(job);
  if (pp < 1 || vpp < 1 || !m.virtual_pipeline_model_parallel_size || m.num_layers < 1 ||
      !m.pipeline_model_parallel_layout.empty() || Uneven(m) || SplitLayers(m) % pp != 0) {
    return {};
  }
  const std::int64_t per_rank = SplitLayers(m) / pp;
  if (per_rank % vpp == 0) return {};
  return {Violation{
      {{"model.num_layers", Str(m.num_layers)}, {kPp, Str(pp)}, {kVpp, Str(vpp)}},
      "number of layers on each pipeline rank (" + Str(per_rank) +
          ") must be divisible by virtual_pipeline_model_parallel_size (" + Str(vpp) + ")",
      "set virtual_pipeline_model_parallel_size to one of: " + Divisors(per_rank, 2, per_rank) +
          " (or null)"}};
}

Violations UnevenWithAccount(const Job& job) {
  const auto& m = job.model;
  if (!Uneven(m) || !Account(m)) return {};
  return {Violation{
      {{kFirst, Opt(m.num_layers_in_first_pipeline_stage)},
       {kLast, Opt(m.num_layers_in_last_pipeline_stage)},
       {"model.account_for_embedding_in_pipeline_split",
        Bool(m.account_for_embedding_in_pipeline_split)},
       {"model.account_for_loss_in_pipeline_split", Bool(m.account_for_loss_in_pipeline_split)}},
      "num_layers_in_first_pipeline_stage and num_layers_in_last_pipeline_stage "
      "cannot be set at the same time with account_for_embedding_in_pipeline_split "
      "and account_for_loss_in_pipeline_split",
      "use either the first/last stage counts or the account_for_* flags"}};
}

Violations LayoutExclusive(const Job& job) {
  const auto& m = job.model;
  if (m.pipeline_model_parallel_layout.empty() || (!Uneven(m) && !Account(m))) return {};
  return {Violation{
      {{kLayout, Quoted(m.pipeline_model_parallel_layout)},
       {kFirst, Opt(m.num_layers_in_first_pipeline_stage)},
       {kLast, Opt(m.num_layers_in_last_pipeline_stage)},
       {"model.account_for_embedding_in_pipeline_split",
        Bool(m.account_for_embedding_in_pipeline_split)},
       {"model.account_for_loss_in_pipeline_split", Bool(m.account_for_loss_in_pipeline_split)}},
      "pipeline_model_parallel_layout cannot be set with other pipeline layout "
      "arguments",
      "remove num_layers_in_first/last_pipeline_stage and the account_for_* flags, "
      "or remove pipeline_model_parallel_layout"}};
}

// MCore TransformerConfig.__post_init__, "Uneven PP": each given stage count.
Violations UnevenStages(const Job& job) {
  const auto& m = job.model;
  if (!m.pipeline_model_parallel_layout.empty()) return {};
  Violations out;
  auto stage = [&](const char* path, const char* which, const std::optional<int>& count) {
    if (!count) return;
    if (*count <= 0) {
      out.push_back(One(path, Str(*count), std::string(path + 6) + " must be larger than 0",
                        std::string("set ") + path + " to a positive layer count"));
    } else if (m.virtual_pipeline_model_parallel_size &&
               *count % *m.virtual_pipeline_model_parallel_size != 0) {
      const int vpp = *m.virtual_pipeline_model_parallel_size;
      out.push_back(Violation{{{path, Str(*count)}, {kVpp, Str(vpp)}},
                              std::string("number of layers at ") + which +
                                  " stage: " + Str(*count) +
                                  " must be divisible by virtual pipeline parallel "
                                  "degree " +
                                  Str(vpp),
                              std::string("set ") + path + " to a multiple of " + Str(vpp)});
    }
  };
  stage(kFirst, "first", m.num_layers_in_first_pipeline_stage);
  stage(kLast, "last", m.num_layers_in_last_pipeline_stage);
  return out;
}

// MCore TransformerConfig.__post_init__, "Uneven PP": the middle stages.
Violations UnevenMiddle(const Job& job) {
  const auto& m = job.model;
  if (!m.pipeline_model_parallel_layout.empty() || !Uneven(m)) return {};
  std::int64_t layers = m.num_layers;
  std::int64_t stages = m.pipeline_model_parallel_size;
  for (const auto& count :
       {m.num_layers_in_first_pipeline_stage, m.num_layers_in_last_pipeline_stage}) {
    if (!count) continue;
    if (*count <= 0) return {};  // pipeline.uneven-stages reports it
    layers -= *count;
    stages -= 1;
  }
  auto fields = [&] {  // built only for a violation (the estimator runs this rule)
    return Fields{{"model.num_layers", Str(m.num_layers)},
                  {kPp, Str(m.pipeline_model_parallel_size)},
                  {kFirst, Opt(m.num_layers_in_first_pipeline_stage)},
                  {kLast, Opt(m.num_layers_in_last_pipeline_stage)}};
  };
  if (layers < 0 || stages < 0 || (layers != 0) != (stages != 0)) {
    return {Violation{fields(),
                      "Mismatch: " + Str(layers) + " middle layers remaining but " + Str(stages) +
                          " middle PP stages available",
                      "make num_layers minus the first/last stage counts fill the remaining "
                      "PP stages (or leave none when no middle stage remains)"}};
  }
  if (stages == 0) return {};
  if (layers % stages != 0) {
    return {Violation{fields(),
                      "number of layers at middle stage: " + Str(layers) +
                          " must be divisible by the middle pipeline model parallel size " +
                          Str(stages),
                      "change the first/last stage counts so that " + Str(stages) +
                          " middle stages get equal layers"}};
  }
  const int vpp = EffectiveVpp(job);
  if (m.virtual_pipeline_model_parallel_size && (layers / stages) % vpp != 0) {
    Fields with_vpp = fields();
    with_vpp.emplace_back(kVpp, Str(vpp));
    return {
        Violation{with_vpp,
                  "number of layers on each middle pipeline rank: " + Str(layers / stages) +
                      " must be divisible by virtual pipeline parallel degree " + Str(vpp),
                  "change the first/last stage counts or virtual_pipeline_model_parallel_size"}};
  }
  return {};
}

// MCore PipelineParallelLayerLayout (parse_str_to_list, __init__, validate_layer_layout).
Violations LayoutParse(const Job& job) {
  const auto& m = job.model;
  if (m.pipeline_model_parallel_layout.empty() || m.pipeline_model_parallel_size < 1) return {};
  const std::string layout_value = Quoted(m.pipeline_model_parallel_layout);
  auto parsed =
      ParsePipelineLayout(m.pipeline_model_parallel_layout, m.pipeline_model_parallel_size);
  if (!parsed) {
    return {Violation{{{kLayout, layout_value}, {kPp, Str(m.pipeline_model_parallel_size)}},
                      parsed.error().message,
                      "fix the layout string: stages separated by '|', layers E, t, m, L, "
                      "repetition x*n and (...)*n"}};
  }
  Violations out;
  for (std::string& message :
       ValidatePipelineLayout(*parsed, m.num_layers, m.mtp_num_layers.value_or(0))) {
    out.push_back(Violation{{{kLayout, layout_value}, {"model.num_layers", Str(m.num_layers)}},
                            std::move(message),
                            "fix the layout string so it lists every layer once"});
  }
  return out;
}

Violations LayoutVpp(const Job& job) {
  const auto& m = job.model;
  if (m.pipeline_model_parallel_layout.empty() || !m.virtual_pipeline_model_parallel_size) {
    return {};
  }
  auto parsed =
      ParsePipelineLayout(m.pipeline_model_parallel_layout, m.pipeline_model_parallel_size);
  if (!parsed || parsed->virtual_pipeline_size == *m.virtual_pipeline_model_parallel_size) {
    return {};
  }
  return {Violation{{{kLayout, Quoted(m.pipeline_model_parallel_layout)},
                     {kVpp, Opt(m.virtual_pipeline_model_parallel_size)}},
                    "virtual_pipeline_model_parallel_size conflicts with "
                    "pipeline_model_parallel_layout (" +
                        Opt(m.virtual_pipeline_model_parallel_size) + " vs detected " +
                        Str(parsed->virtual_pipeline_size) + ")",
                    "set virtual_pipeline_model_parallel_size: " +
                        Str(parsed->virtual_pipeline_size) + " (or null)"}};
}

Violations DeferEmbeddingWgrad(const Job& job) {
  const auto& m = job.model;
  if (!m.defer_embedding_wgrad_compute || m.pipeline_model_parallel_size != 1) return {};
  return {Violation{{{"model.defer_embedding_wgrad_compute", "true"}, {kPp, "1"}},
                    "Cannot defer embedding wgrad compute when pipeline model parallel is not "
                    "used",
                    "set defer_embedding_wgrad_compute: false"}};
}

Violations DeferEmbeddingWgradFusion(const Job& job) {
  const auto& m = job.model;
  if (!m.defer_embedding_wgrad_compute || m.gradient_accumulation_fusion) return {};
  return {
      Violation{{{"model.defer_embedding_wgrad_compute", "true"},
                 {"model.gradient_accumulation_fusion", "false"}},
                "Cannot defer embedding wgrad compute when gradient accumulation fusion is "
                "not used",
                "set defer_embedding_wgrad_compute: false or gradient_accumulation_fusion: true"}};
}

// True when the interleaved schedule runs: PP > 1 and VPP set, or a layout with several
// stages per rank.
bool Interleaved(const Job& job) {
  const auto& m = job.model;
  if (m.pipeline_model_parallel_size <= 1) return false;
  if (m.virtual_pipeline_model_parallel_size) return true;
  if (m.pipeline_model_parallel_layout.empty()) return false;
  auto parsed =
      ParsePipelineLayout(m.pipeline_model_parallel_layout, m.pipeline_model_parallel_size);
  return parsed && parsed->virtual_pipeline_size > 1;
}

// MCore schedules.py forward_backward_pipelining_with_interleaving.
Violations MicrobatchGroup(const Job& job) {
  const auto& m = job.model;
  if (!SizesValid(job) || !Interleaved(job)) return {};
  const int pp = m.pipeline_model_parallel_size;
  const std::int64_t group = m.microbatch_group_size_per_vp_stage.value_or(pp);
  const std::int64_t step = job.train.micro_batch_size * DataParallelSize(job);
  if (step <= 0 || job.train.global_batch_size % step != 0) return {};  // layout.global-batch
  const std::int64_t mb = NumMicrobatches(job);
  // Built only for a violation: the estimator runs this rule on every estimate.
  auto fields = [&] {
    return Fields{
        {"model.microbatch_group_size_per_vp_stage", Opt(m.microbatch_group_size_per_vp_stage)},
        {kPp, Str(pp)},
        {"train.global_batch_size", Str(job.train.global_batch_size)}};
  };
  if (group > mb || group < pp) {
    return {Violation{
        fields(),
        "The number of contiguous micro-batches in a virtual pipeline stage "
        "should range in [PP=" +
            Str(pp) + ", M=" + Str(mb) + "] but it is " + Str(group),
        group < pp ? "set microbatch_group_size_per_vp_stage to at least PP (" + Str(pp) +
                         ") and at most M (" + Str(mb) + ")"
                   : "raise global_batch_size so that there are at least " + Str(group) +
                         " micro-batches per step, or set microbatch_group_size_per_vp_stage "
                         "in [PP, M]"}};
  }
  const std::int64_t rest = mb % group;
  if (rest > 0 && rest < pp) {
    return {Violation{fields(),
                      "The remainder of M (the total micro-batches, " + Str(mb) +
                          ") divided by N (contiguous micro-batches in a virtual pipeline stage, " +
                          Str(group) +
                          ") should be 0, or larger than or equal to the "
                          "pipeline-parallel size, but it is " +
                          Str(rest),
                      "make the number of micro-batches a multiple of " + Str(group)}};
  }
  return {};
}

constexpr Rule kRules[] = {
    {{"pipeline.vpp-needs-pp", Severity::kError, RuleScope::kMegatron,
      "virtual pipeline (interleaved schedule) requires PP > 1",
      "virtual_pipeline_model_parallel_size: null, or PP > 1",
      "MCore parallel_state.initialize_model_parallel"},
     VppNeedsPp},
    {{"pipeline.vpp-pp2", Severity::kWarning, RuleScope::kMegatron,
      "Megatron-LM needs PP > 2 for VPP unless overlap_p2p_comm",
      "use PP > 2, or --overlap-p2p-comm with Megatron-LM", kMlmArgs},
     VppWithPp2},
    {{"pipeline.even-layers", Severity::kError, RuleScope::kMegatron,
      "(num_layers [+1 embedding] [+1 loss]) % PP == 0 for an even split",
      "choose a PP that divides the layers, or an uneven split", kMlmArgs},
     EvenLayers},
    {{"pipeline.even-layers-vpp", Severity::kError, RuleScope::kMegatron,
      "layers per pipeline rank % VPP == 0", "choose a VPP that divides the layers per rank",
      kMcoreTransformer},
     EvenLayersVpp},
    {{"pipeline.uneven-with-account", Severity::kError, RuleScope::kMegatron,
      "first/last stage counts exclude account_for_embedding/loss_in_pipeline_split",
      "use one mechanism", kMcoreTransformer},
     UnevenWithAccount},
    {{"pipeline.layout-exclusive", Severity::kError, RuleScope::kMegatron,
      "pipeline_model_parallel_layout excludes the other pipeline layout arguments",
      "use one mechanism", kMcoreTransformer},
     LayoutExclusive},
    {{"pipeline.uneven-stages", Severity::kError, RuleScope::kMegatron,
      "first/last stage layer counts are > 0 and divisible by VPP",
      "change num_layers_in_first/last_pipeline_stage", kMcoreTransformer},
     UnevenStages},
    {{"pipeline.uneven-middle", Severity::kError, RuleScope::kMegatron,
      "with uneven PP the middle stages split the remaining layers evenly (and by VPP)",
      "change the first/last stage counts", kMcoreTransformer},
     UnevenMiddle},
    {{"pipeline.layout-parse", Severity::kError, RuleScope::kMegatron,
      "pipeline_model_parallel_layout parses, has PP*k stages and lists every layer once",
      "fix the layout string", "MCore PipelineParallelLayerLayout"},
     LayoutParse},
    {{"pipeline.layout-vpp", Severity::kError, RuleScope::kMegatron,
      "VPP equals the layout's stages / PP", "set VPP to the layout's value or null",
      kMcoreTransformer},
     LayoutVpp},
    {{"pipeline.defer-embedding-wgrad", Severity::kError, RuleScope::kMegatron,
      "defer_embedding_wgrad_compute requires PP > 1", "defer_embedding_wgrad_compute: false",
      kMcoreParallel},
     DeferEmbeddingWgrad},
    {{"pipeline.defer-embedding-wgrad-fusion", Severity::kError, RuleScope::kMegatron,
      "defer_embedding_wgrad_compute requires gradient_accumulation_fusion",
      "defer_embedding_wgrad_compute: false, or gradient_accumulation_fusion: true",
      kMcoreParallel},
     DeferEmbeddingWgradFusion},
    {{"pipeline.microbatch-group", Severity::kError, RuleScope::kMegatron,
      "interleaved schedule: PP <= microbatch group <= micro-batches, remainder 0 or >= PP",
      "raise global_batch_size or change microbatch_group_size_per_vp_stage",
      "MCore schedules.forward_backward_pipelining_with_interleaving"},
     MicrobatchGroup},
};

}  // namespace

std::span<const Rule> PipelineRules() { return kRules; }

}  // namespace memtune::model::checks
