// The `model:` field table: Bridge GPTModelProvider / MCore TransformerConfig fields that
// change memory. Defaults are those of Megatron-Core 2a75ac12 (the commit Megatron-Bridge
// 067f987d pins) and Bridge's GPTModelProvider; see docs/job.md.
#include "memtune/core/suggest.h"
#include "memtune/model/parameters.h"
#include "model/job_schema.h"

namespace memtune::model::internal {
namespace {

constexpr std::int64_t kMaxExperts = 100'000;

bool IsMoe(const Job& j) { return j.model.num_moe_experts.has_value(); }
bool IsMla(const Job& j) { return j.model.multi_latent_attention; }
bool HasVpp(const Job& j) { return j.model.virtual_pipeline_model_parallel_size.has_value(); }
bool PadsVocab(const Job& j) { return j.model.should_pad_vocab; }
bool Selective(const Job& j) {
  return j.model.recompute_granularity == RecomputeGranularity::kSelective;
}
bool LearnedPositions(const Job& j) {
  return j.model.position_embedding_type == PositionEmbedding::kLearnedAbsolute;
}
bool FusableActivation(const Job& j) {  // where unfused activations keep more (gated, MoE)
  return j.model.gated_linear_unit || IsMoe(j);
}
bool TrainsMegatronWeights(const Job& j) {  // weight gradients through MCore's DDP hooks
  return !j.peft && j.memtune.framework == Framework::kMegatron;
}
bool LocalUnfusedAttention(const Job& j) {
  return CoreAttentionOf(j.model) == CoreAttention::kLocal;
}
bool NoPrecisionPreset(const Job& j) {
  return j.mixed_precision.empty() && j.memtune.framework == Framework::kMegatron;
}

const Binder<ModelBase> kModel{[](JobSpec& j) -> ModelBase& { return j.model; },
                               [](const Job& j) -> const ModelBase& { return j.model; }};
const DerivedBinder<ModelSpec, ModelConfig> kDerived{
    [](JobSpec& j) -> ModelSpec& { return j.model; },
    [](const Job& j) -> const ModelConfig& { return j.model; }};

// Activation functions by the last component of the Python name Bridge dumps
// ({_target_: torch.nn.functional.silu, _call_: false}) or a plain name.
const std::vector<std::string> kActivations = {
    "gelu", "silu", "relu", "quick_gelu", "squared_relu", "fast_gelu", "openai_gelu", "erf_gelu"};

FieldSpec ActivationField() {
  return {"activation_func",
          [](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
            MEMTUNE_TRY(std::string name, ToName(n, p));
            if (const auto dot = name.rfind('.'); dot != std::string::npos) name.erase(0, dot + 1);
            if (name.empty()) return WrongType(n, p, "a function name", JoinNames(kActivations));
            j.model.activation_func = name;
            return OkStatus();
          },
          [](const Job& j) { return Json(j.model.activation_func); }};
}

// moe_layer_freq: an int k (every k-th layer is MoE) or a 0/1 flag per layer
// (MCore TransformerConfig.moe_layer_freq: Union[int, List[int]]).
FieldSpec MoeLayerFreqField() {
  return {"moe_layer_freq",
          [](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
            if (n.IsScalar()) {
              MEMTUNE_TRY(const std::int64_t k, ToInt(n, p, 1, kMaxLayers));
              j.model.moe_layer_freq = {static_cast<int>(k)};
              j.model.moe_layer_freq_is_list = false;
              return OkStatus();
            }
            if (!n.IsSequence()) {
              return WrongType(n, p, "an integer or a list of 0/1",
                               "an integer k (every k-th layer) or a list such as [0, 1, 1]");
            }
            std::vector<int> flags;
            for (std::size_t i = 0; i < n.size(); ++i) {
              MEMTUNE_TRY(const std::int64_t f,
                          ToInt(n[i], p + "[" + std::to_string(i) + "]", 0, 1));
              flags.push_back(static_cast<int>(f));
            }
            j.model.moe_layer_freq = std::move(flags);
            j.model.moe_layer_freq_is_list = true;
            return OkStatus();
          },
          [](const Job& j) {
            if (j.model.moe_layer_freq_is_list) return Json(j.model.moe_layer_freq);
            return Json(j.model.moe_layer_freq.empty() ? 1 : j.model.moe_layer_freq.front());
          }};
}

// pipeline_model_parallel_layout: a string ("Et*2|(t*2|)*34,t*3|tL") or the list of lists
// PipelineParallelLayerLayout dumps as; kept as text.
FieldSpec LayoutField() {
  FieldSpec f{"pipeline_model_parallel_layout",
              [](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
                if (n.IsNull()) {
                  j.model.pipeline_model_parallel_layout.clear();
                } else if (n.IsScalar()) {
                  j.model.pipeline_model_parallel_layout = n.Scalar();
                } else if (n.IsSequence()) {
                  j.model.pipeline_model_parallel_layout = ValueText(n);
                } else {
                  return WrongType(n, p, "a layout", "a string such as \"Et*2|(t*2|)*34,tL\"");
                }
                return OkStatus();
              },
              [](const Job& j) {
                const std::string& v = j.model.pipeline_model_parallel_layout;
                return v.empty() ? Json(nullptr) : Json(v);
              }};
  f.null_is_value = true;
  return f;
}

// cuda_graph_scope (deprecated in MCore 2a75ac12 for cuda_graph_modules): a list of module
// names or CudaGraphModule enums; "full" (or an empty list) captures the whole layer.
FieldSpec CudaGraphScopeField() {
  static const std::vector<std::string> kScopes = {"attn",
                                                   "mlp",
                                                   "moe",
                                                   "moe_router",
                                                   "moe_preprocess",
                                                   "mamba",
                                                   "full",
                                                   "full_iteration",
                                                   "full_iteration_inference"};
  return {"cuda_graph_scope",
          [](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
            std::vector<std::string> scopes;
            if (n.IsSequence()) {
              MEMTUNE_TRY(scopes, ToNameList(n, p, kScopes));
            } else if (!n.IsNull()) {
              MEMTUNE_TRY(std::string one, ToEnum(n, p, kScopes));
              scopes.push_back(std::move(one));
            }
            std::erase(scopes, std::string("full"));
            j.model.cuda_graph_scope = std::move(scopes);
            return OkStatus();
          },
          [](const Job& j) { return Json(j.model.cuda_graph_scope); }};
}

std::vector<FieldSpec> ArchitectureFields() {
  const auto& m = kModel;
  return {
      m.Text("preset", &ModelConfig::preset),
      m.Text("hf_config", &ModelConfig::hf_config),
      m.Int("num_layers", &ModelConfig::num_layers, 1, kMaxLayers),
      m.Int("hidden_size", &ModelConfig::hidden_size, 1, kMaxDim),
      Memory(kDerived.Int("ffn_hidden_size", &ModelSpec::ffn_hidden_size,
                          &ModelConfig::ffn_hidden_size, 1, kMaxDim),
             "4 * hidden_size"),
      m.Int("num_attention_heads", &ModelConfig::num_attention_heads, 1, kMaxHeads),
      Memory(kDerived.Int("num_query_groups", &ModelSpec::num_query_groups,
                          &ModelConfig::num_query_groups, 1, kMaxHeads),
             "num_attention_heads"),
      Memory(kDerived.Int("kv_channels", &ModelSpec::kv_channels, &ModelConfig::kv_channels, 1,
                          kMaxDim),
             "hidden_size / num_attention_heads"),
      m.Int("vocab_size", &ModelConfig::vocab_size, 1, kMaxVocab),
      Memory(m.Int("make_vocab_size_divisible_by", &ModelConfig::make_vocab_size_divisible_by, 1,
                   kMaxDim),
             "Bridge GPTModelProvider", PadsVocab),
      Memory(m.Bool("should_pad_vocab", &ModelConfig::should_pad_vocab), "Bridge GPTModelProvider"),
      Memory(m.Bool("share_embeddings_and_output_weights",
                    &ModelConfig::share_embeddings_and_output_weights),
             "Bridge GPTModelProvider"),
      Memory(m.Bool("gated_linear_unit", &ModelConfig::gated_linear_unit),
             "MCore TransformerConfig"),
      Memory(ActivationField(), "MCore TransformerConfig"),
      // MCore's dataclass says false, but Megatron-LM's --bias-swiglu-fusion and
      // --bias-gelu-fusion default on and Bridge's model bridges (Llama, DeepSeek, GLM,
      // GPT-OSS, Kimi, Qwen-VL) set it: what real runs use. The Qwen2 / Qwen3 / Qwen3-MoE
      // bridges do not: model.hf_config of those types and the qwen3 presets set false.
      Memory(m.Bool("bias_activation_fusion", &ModelConfig::bias_activation_fusion),
             "Megatron-LM arguments.py and Bridge's model bridges", FusableActivation),
      m.Bool("use_te_activation_func", &ModelConfig::use_te_activation_func),
      Memory(m.Choice(
                 "normalization", &ModelConfig::normalization,
                 {{"LayerNorm", Normalization::kLayerNorm}, {"RMSNorm", Normalization::kRMSNorm}}),
             "MCore TransformerConfig"),
      Memory(m.Bool("add_bias_linear", &ModelConfig::add_bias_linear), "MCore TransformerConfig"),
      Memory(m.Bool("add_qkv_bias", &ModelConfig::add_qkv_bias), "MCore TransformerConfig"),
      Memory(m.Bool("qk_layernorm", &ModelConfig::qk_layernorm), "MCore TransformerConfig"),
      // Gemma 2 / 3 (Bridge gemma2_layer_spec / gemma3_layer_spec, Gemma2ModelProvider);
      // off in GPTModelProvider's spec, so not listed among the memory defaults.
      m.Bool("sublayer_post_norms", &ModelConfig::sublayer_post_norms),
      m.OptDouble("final_logit_softcapping", &ModelConfig::final_logit_softcapping, 0, 1e9),
      Memory(m.Double("hidden_dropout", &ModelConfig::hidden_dropout, 0, 1),
             "MCore TransformerConfig"),
      Memory(m.Double("attention_dropout", &ModelConfig::attention_dropout, 0, 1),
             "MCore TransformerConfig"),
      Memory(m.Named("position_embedding_type", &ModelConfig::position_embedding_type),
             "Bridge GPTModelProvider"),
      Memory(kDerived.Int("max_position_embeddings", &ModelSpec::max_position_embeddings,
                          &ModelConfig::max_position_embeddings, 1, kMaxSeqTokens),
             "seq_length", LearnedPositions),
      m.Named("softmax_type", &ModelConfig::softmax_type),
  };
}

std::vector<FieldSpec> MoeFields() {
  const auto& m = kModel;
  return {
      m.OptInt("num_moe_experts", &ModelConfig::num_moe_experts, 1, kMaxExperts),
      Memory(m.Int("moe_router_topk", &ModelConfig::moe_router_topk, 1, kMaxExperts),
             "MCore TransformerConfig", IsMoe),
      Memory(m.OptInt("moe_ffn_hidden_size", &ModelConfig::moe_ffn_hidden_size, 1, kMaxDim),
             "ffn_hidden_size", IsMoe),
      m.OptInt("moe_shared_expert_intermediate_size",
               &ModelConfig::moe_shared_expert_intermediate_size, 1, kMaxDim),
      m.Bool("moe_shared_expert_gate", &ModelConfig::moe_shared_expert_gate),
      m.Bool("moe_shared_expert_overlap", &ModelConfig::moe_shared_expert_overlap),
      Memory(MoeLayerFreqField(), "MCore TransformerConfig", IsMoe),
      m.Bool("moe_grouped_gemm", &ModelConfig::moe_grouped_gemm),
      m.Bool("moe_permute_fusion", &ModelConfig::moe_permute_fusion),
      Memory(m.Named("moe_token_dispatcher_type", &ModelConfig::moe_token_dispatcher_type),
             "MCore TransformerConfig", IsMoe),
      m.OptInt("moe_latent_size", &ModelConfig::moe_latent_size, 1, kMaxDim),
      m.Bool("moe_router_enable_expert_bias", &ModelConfig::moe_router_enable_expert_bias),
      m.OptDouble("moe_expert_capacity_factor", &ModelConfig::moe_expert_capacity_factor, 0, 1e6),
      m.Bool("moe_router_force_load_balancing", &ModelConfig::moe_router_force_load_balancing),
      m.Bool("multi_latent_attention", &ModelConfig::multi_latent_attention),
      Memory(kDerived.OptInt("q_lora_rank", &ModelSpec::q_lora_rank, &ModelConfig::q_lora_rank, 1,
                             kMaxDim),
             "MCore MLATransformerConfig", IsMla),
      Memory(m.Int("kv_lora_rank", &ModelConfig::kv_lora_rank, 1, kMaxDim),
             "MCore MLATransformerConfig", IsMla),
      Memory(m.Int("qk_head_dim", &ModelConfig::qk_head_dim, 1, kMaxDim),
             "MCore MLATransformerConfig", IsMla),
      Memory(m.Int("qk_pos_emb_head_dim", &ModelConfig::qk_pos_emb_head_dim, 1, kMaxDim),
             "MCore MLATransformerConfig", IsMla),
      Memory(m.Int("v_head_dim", &ModelConfig::v_head_dim, 1, kMaxDim),
             "MCore MLATransformerConfig", IsMla),
      m.OptInt("mtp_num_layers", &ModelConfig::mtp_num_layers, 0, kMaxLayers),
  };
}

std::vector<FieldSpec> ParallelFields() {
  const auto& m = kModel;
  return {
      Memory(m.Int("tensor_model_parallel_size", &ModelConfig::tensor_model_parallel_size, 1,
                   kMaxParallel),
             "MCore ModelParallelConfig"),
      Memory(m.Int("pipeline_model_parallel_size", &ModelConfig::pipeline_model_parallel_size, 1,
                   kMaxParallel),
             "MCore ModelParallelConfig"),
      m.OptInt("virtual_pipeline_model_parallel_size",
               &ModelConfig::virtual_pipeline_model_parallel_size, 1, kMaxParallel),
      Memory(m.Int("context_parallel_size", &ModelConfig::context_parallel_size, 1, kMaxParallel),
             "MCore ModelParallelConfig"),
      Memory(m.Int("expert_model_parallel_size", &ModelConfig::expert_model_parallel_size, 1,
                   kMaxParallel),
             "MCore ModelParallelConfig", IsMoe),
      Memory(m.OptInt("expert_tensor_parallel_size", &ModelConfig::expert_tensor_parallel_size, 1,
                      kMaxParallel),
             "tensor_model_parallel_size", IsMoe),
      Memory(m.Bool("sequence_parallel", &ModelConfig::sequence_parallel),
             "MCore ModelParallelConfig"),
      Memory(m.OptInt("microbatch_group_size_per_vp_stage",
                      &ModelConfig::microbatch_group_size_per_vp_stage, 1, kMaxParallel),
             "pipeline_model_parallel_size", HasVpp),
      m.Bool("account_for_embedding_in_pipeline_split",
             &ModelConfig::account_for_embedding_in_pipeline_split),
      m.Bool("account_for_loss_in_pipeline_split",
             &ModelConfig::account_for_loss_in_pipeline_split),
      m.OptInt("num_layers_in_first_pipeline_stage",
               &ModelConfig::num_layers_in_first_pipeline_stage, 0, kMaxLayers),
      m.OptInt("num_layers_in_last_pipeline_stage", &ModelConfig::num_layers_in_last_pipeline_stage,
               0, kMaxLayers),
      LayoutField(),
      Memory(m.Int("seq_length", &ModelConfig::seq_length, 1, kMaxSeqTokens),
             "Bridge GPTModelProvider"),
      m.Bool("overlap_moe_expert_parallel_comm", &ModelConfig::overlap_moe_expert_parallel_comm),
      m.Bool("tp_comm_overlap", &ModelConfig::tp_comm_overlap),
      m.OptBool("batch_p2p_comm", &ModelConfig::batch_p2p_comm),
      m.Bool("defer_embedding_wgrad_compute", &ModelConfig::defer_embedding_wgrad_compute),
      m.Int("wgrad_deferral_limit", &ModelConfig::wgrad_deferral_limit, 0, kMaxParallel),
      Memory(m.Bool("gradient_accumulation_fusion", &ModelConfig::gradient_accumulation_fusion),
             "Megatron-LM arguments.py and Bridge GPTModelProvider", TrainsMegatronWeights),
  };
}

std::vector<FieldSpec> LeverFields() {
  const auto& m = kModel;
  return {
      m.Choice(
          "recompute_granularity", &ModelConfig::recompute_granularity,
          {{"selective", RecomputeGranularity::kSelective}, {"full", RecomputeGranularity::kFull}},
          RecomputeGranularity::kNone),
      m.Choice("recompute_method", &ModelConfig::recompute_method,
               {{"uniform", RecomputeMethod::kUniform}, {"block", RecomputeMethod::kBlock}},
               RecomputeMethod::kNone),
      m.OptInt("recompute_num_layers", &ModelConfig::recompute_num_layers, 0, kMaxLayers),
      Memory(m.Names("recompute_modules", &ModelConfig::recompute_modules,
                     {"core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe",
                      "shared_experts", "gdn_norm_out"}),
             "MCore TransformerConfig", Selective),
      m.Bool("distribute_saved_activations", &ModelConfig::distribute_saved_activations),
      m.Bool("cpu_offloading", &ModelConfig::cpu_offloading),
      m.Int("cpu_offloading_num_layers", &ModelConfig::cpu_offloading_num_layers, 0, kMaxLayers),
      m.Bool("cpu_offloading_activations", &ModelConfig::cpu_offloading_activations),
      m.Bool("cpu_offloading_weights", &ModelConfig::cpu_offloading_weights),
      m.Bool("fine_grained_activation_offloading",
             &ModelConfig::fine_grained_activation_offloading),
      m.Names("offload_modules", &ModelConfig::offload_modules),
      m.Named("cuda_graph_impl", &ModelConfig::cuda_graph_impl),
      CudaGraphScopeField(),
      Alias("cuda_graph_modules", CudaGraphScopeField()),
      Memory(m.Bool("cross_entropy_loss_fusion", &ModelConfig::cross_entropy_loss_fusion),
             "Bridge GPTModelProvider"),
      m.Named("cross_entropy_fusion_impl", &ModelConfig::cross_entropy_fusion_impl),
      // (Not "defaults assumed": the estimate's assumptions line names the attention used.)
      m.Named("attention_backend", &ModelConfig::attention_backend),
      m.Named("transformer_impl", &ModelConfig::transformer_impl),
      Memory(m.Bool("masked_softmax_fusion", &ModelConfig::masked_softmax_fusion),
             "Bridge GPTModelProvider", LocalUnfusedAttention),
      Memory(m.Bool("attention_softmax_in_fp32", &ModelConfig::attention_softmax_in_fp32),
             "Bridge GPTModelProvider", LocalUnfusedAttention),
  };
}

std::vector<FieldSpec> PrecisionFields() {
  const auto& m = kModel;
  const std::vector<Dtype> kFloat = {Dtype::kFp32, Dtype::kBf16, Dtype::kFp16};
  return {
      m.Bool("bf16", &ModelConfig::bf16),
      m.Bool("fp16", &ModelConfig::fp16),
      Memory(m.DtypeField("params_dtype", &ModelConfig::params_dtype, kFloat),
             "MCore ModelParallelConfig; no mixed_precision preset", NoPrecisionPreset),
      kDerived.DtypeField("pipeline_dtype", &ModelSpec::pipeline_dtype,
                          &ModelConfig::pipeline_dtype, kFloat),
      m.NamedOrNull("fp8", &ModelConfig::fp8, Fp8Format::kNone),
      m.NamedOrNull("fp8_recipe", &ModelConfig::fp8_recipe, Fp8Recipe::kNone),
      m.Bool("fp8_param", &ModelConfig::fp8_param),
      m.Bool("fp8_param_gather", &ModelConfig::fp8_param_gather),
      m.NamedOrNull("fp4", &ModelConfig::fp4, Fp4Format::kNone),
      m.Bool("fp4_param", &ModelConfig::fp4_param),
      m.Bool("first_last_layers_bf16", &ModelConfig::first_last_layers_bf16),
      m.Int("num_layers_at_start_in_bf16", &ModelConfig::num_layers_at_start_in_bf16, 0,
            kMaxLayers),
      m.Int("num_layers_at_end_in_bf16", &ModelConfig::num_layers_at_end_in_bf16, 0, kMaxLayers),
  };
}

SectionSpec BuildModelSection() {
  // MCore TransformerConfig / ModelParallelConfig and GPTModelProvider fields within a
  // did-you-mean distance of a field memtune reads.
  SectionSpec s{"model",
                {},
                false,
                {"dense_grouped_gemm", "fp4_recipe", "moe_expert_rank_capacity_factor",
                 "moe_router_dtype", "moe_shared_expert_glu_interleave_size", "tp_comm_overlap_ag",
                 "tp_comm_overlap_rs", "tp_comm_overlap_rs_dgrad", "tp_comm_overlap_cfg"}};
  for (auto part :
       {ArchitectureFields(), MoeFields(), ParallelFields(), LeverFields(), PrecisionFields()}) {
    for (FieldSpec& f : part) s.fields.push_back(std::move(f));
  }
  return s;
}

}  // namespace

const SectionSpec& ModelTable() {
  static const SectionSpec kSection = BuildModelSection();
  return kSection;
}

}  // namespace memtune::model::internal
