// Collected Megatron-LM flags -> a job document, with Megatron-LM's own defaults
// (megatron/training/arguments.py validate_args and core_transformer_config_from_args,
// megatron/core/transformer/transformer_config.py @ d98e8a64).
#include <algorithm>
#include <charconv>
#include <optional>
#include <tuple>

#include "memtune/core/suggest.h"
#include "model/job_schema.h"
#include "model/megatron_args.h"
#include "model/megatron_flag_reader.h"
#include "model/moe_freq_pattern.h"
#include "model/yaml_number.h"

namespace memtune::model::internal {
namespace {

YAML::Node Flow(const std::vector<std::string>& items) {
  YAML::Node list(YAML::NodeType::Sequence);
  list.SetStyle(YAML::EmitterStyle::Flow);
  for (const std::string& item : items) list.push_back(item);
  return list;
}

// Vocabulary size before padding, as Megatron-LM's tokenizer reports it
// (megatron/core/tokenizers/utils/build_tokenizer.py): --vocab-size for NullTokenizer and
// TikTokenizer (default 2^17, tiktoken_tokenizer.py DEFAULT_TIKTOKEN_MAX_VOCAB); the GPT-2 BPE
// vocabulary's 50,257 tokens for GPT2BPETokenizer, which pretrain_gpt.py makes the default
// (args_defaults). Other tokenizers read their size from a file memtune does not have, so
// --vocab-size is taken as given and its absence is left to the job's own error.
constexpr std::int64_t kGpt2BpeVocab = 50257;
constexpr std::int64_t kTiktokenDefaultVocab = std::int64_t{1} << 17;

// Tokenizers whose size memtune knows without their files: len(tokenizer), which
// Megatron-LM's HuggingFaceTokenizer reports as vocab_size. Matched by the last component
// of --tokenizer-model (a hub id or a local directory), ignoring case and "-Instruct".
// Llama 3.x: 128,000 BPE tokens + 256 reserved special tokens (tokenizer.json of
// meta-llama/Meta-Llama-3-8B and Llama-3.1/3.2/3.3); Llama 2 and Mistral 7B v0.1:
// 32,000-piece SentencePiece models (tokenizer.model); GPT-2: 50,257.
std::optional<std::int64_t> KnownTokenizerVocab(std::string id) {
  if (const auto slash = id.find_last_of('/'); slash != std::string::npos) {
    id = id.substr(slash + 1);
  }
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (const auto at = id.find("-instruct"); at != std::string::npos) id.erase(at);
  static const std::pair<const char*, std::int64_t> kKnown[] = {
      {"meta-llama-3-8b", 128256},    {"meta-llama-3-70b", 128256}, {"llama-3.1-8b", 128256},
      {"llama-3.1-70b", 128256},      {"llama-3.1-405b", 128256},   {"meta-llama-3.1-8b", 128256},
      {"meta-llama-3.1-70b", 128256}, {"llama-3.2-1b", 128256},     {"llama-3.2-3b", 128256},
      {"llama-3.3-70b", 128256},      {"llama-2-7b-hf", 32000},     {"llama-2-13b-hf", 32000},
      {"llama-2-70b-hf", 32000},      {"mistral-7b-v0.1", 32000},   {"gpt2", 50257},
  };
  for (const auto& [name, vocab] : kKnown) {
    if (id == name) return vocab;
  }
  return std::nullopt;
}

Status Vocabulary(const FlagReader& r, YAML::Node& m) {
  MEMTUNE_TRY(auto given, r.Int("vocab-size"));

  const std::string* type = r.Value("tokenizer-type");
  const std::string tokenizer = type ? *type : (r.Value("vocab-file") ? "GPT2BPETokenizer" : "");
  if (tokenizer == "GPT2BPETokenizer") {
    m["vocab_size"] = kGpt2BpeVocab;
  } else if (tokenizer == "TikTokenizer") {
    m["vocab_size"] = given.value_or(kTiktokenDefaultVocab);
  } else if (given) {
    m["vocab_size"] = *given;
  } else if (const std::string* model = r.Value("tokenizer-model")) {
    if (auto known = KnownTokenizerVocab(*model)) m["vocab_size"] = *known;
  }
  return OkStatus();
}

// Activation: --swiglu (gated SiLU), --quick-geglu (gated quick GeLU), --squared-relu, else
// GeLU. Default FFN: int(4h * 2/3 / 64) * 64 with --swiglu, else 4h (validate_args).
Status Architecture(const FlagReader& r, YAML::Node& m) {
  for (const auto& [flag, field] : {std::pair{"num-layers", "num_layers"},
                                    {"hidden-size", "hidden_size"},
                                    {"ffn-hidden-size", "ffn_hidden_size"},
                                    {"num-attention-heads", "num_attention_heads"},
                                    {"kv-channels", "kv_channels"}}) {
    MEMTUNE_RETURN_IF_ERROR(CopyInt(r, m, flag, field));
  }
  MEMTUNE_RETURN_IF_ERROR(Vocabulary(r, m));
  MEMTUNE_RETURN_IF_ERROR(CopyInt(r, m, "max-position-embeddings", "max_position_embeddings"));
  const bool swiglu = r.Switch("swiglu");
  // A hidden size past the limit gets no default FFN (the range check names hidden_size).
  if (!m["ffn_hidden_size"] && m["hidden_size"] &&
      m["hidden_size"].as<std::int64_t>() <= internal::kMaxDim) {
    const auto h = m["hidden_size"].as<std::int64_t>();
    m["ffn_hidden_size"] = swiglu ? (4 * h * 2 / 3) / 64 * 64 : 4 * h;
  }
  if (r.Switch("group-query-attention")) {
    MEMTUNE_TRY(auto groups, r.Int("num-query-groups"));
    m["num_query_groups"] = groups.value_or(1);  // TransformerConfig argparse default 1
  }
  MEMTUNE_TRY(auto divisor, r.Int("make-vocab-size-divisible-by"));
  m["make_vocab_size_divisible_by"] = divisor.value_or(128);
  m["should_pad_vocab"] = true;  // Megatron-LM always pads (_vocab_size_with_padding)
  m["share_embeddings_and_output_weights"] = !r.Switch("untie-embeddings-and-output-weights");
  if (r.Switch("use-te-activation-func")) m["use_te_activation_func"] = true;
  const bool quick_geglu = r.Switch("quick-geglu");
  m["gated_linear_unit"] = swiglu || quick_geglu;
  // argument_utils.py: bias_activation_fusion = bias_swiglu_fusion with --swiglu, else
  // bias_gelu_fusion, which validate_args turns off without linear biases.
  m["bias_activation_fusion"] =
      swiglu ? !r.Switch("no-bias-swiglu-fusion")
             : !r.Switch("no-bias-gelu-fusion") && !r.Switch("disable-bias-linear");
  m["activation_func"] = swiglu                     ? "silu"
                         : quick_geglu              ? "quick_gelu"
                         : r.Switch("squared-relu") ? "squared_relu"
                                                    : "gelu";
  MEMTUNE_TRY(auto norm, r.Choice("normalization", {"LayerNorm", "RMSNorm"}));
  m["normalization"] = norm.value_or("LayerNorm");
  m["add_bias_linear"] = !r.Switch("disable-bias-linear");
  m["add_qkv_bias"] = r.Switch("add-qkv-bias");
  m["qk_layernorm"] = r.Switch("qk-layernorm");
  MEMTUNE_TRY(auto hidden_dropout, r.Float("hidden-dropout"));
  m["hidden_dropout"] = ShortestNumberNode(hidden_dropout.value_or(0.1));
  MEMTUNE_TRY(auto attention_dropout, r.Float("attention-dropout"));
  m["attention_dropout"] = ShortestNumberNode(attention_dropout.value_or(0.1));
  MEMTUNE_TRY(auto position,
              r.Choice("position-embedding-type",
                       {"learned_absolute", "rope", "yarn", "mrope", "relative", "none"}));
  m["position_embedding_type"] =
      position.value_or(r.Switch("use-rotary-position-embeddings") ? "rope" : "learned_absolute");
  return OkStatus();
}

Status Moe(const FlagReader& r, YAML::Node& m) {
  MEMTUNE_TRY(auto experts, r.Int("num-experts"));
  if (!experts) return OkStatus();
  m["num_moe_experts"] = *experts;
  MEMTUNE_TRY(auto topk, r.Int("moe-router-topk"));
  m["moe_router_topk"] = topk.value_or(2);
  MEMTUNE_TRY(auto expert_ffn, r.Int("moe-ffn-hidden-size"));
  if (expert_ffn) {
    m["moe_ffn_hidden_size"] = *expert_ffn;
  } else if (m["ffn_hidden_size"]) {  // validate_args: MoE FFN defaults to the dense one
    m["moe_ffn_hidden_size"] = m["ffn_hidden_size"].as<std::int64_t>();
  }
  MEMTUNE_RETURN_IF_ERROR(
      CopyInt(r, m, "moe-shared-expert-intermediate-size", "moe_shared_expert_intermediate_size"));
  MEMTUNE_RETURN_IF_ERROR(CopyInt(r, m, "moe-latent-size", "moe_latent_size"));
  if (const std::string* freq = r.Value("moe-layer-freq")) {
    MEMTUNE_TRY(const MoeFreq parsed, ParseMoeFreq(*freq, "--moe-layer-freq"));
    // Megatron-LM's check (moe_layer_pattern must list every layer), before the list is built.
    if (parsed.is_list && m["num_layers"] &&
        static_cast<std::int64_t>(parsed.pattern.size()) != m["num_layers"].as<std::int64_t>()) {
      return InvalidConfig(
          "--moe-layer-freq",
          "Invalid length of moe_layer_pattern: " + std::to_string(parsed.pattern.size()) +
              ", expected " + m["num_layers"].as<std::string>() + " (--num-layers)");
    }
    if (parsed.is_list) {
      YAML::Node list(YAML::NodeType::Sequence);
      list.SetStyle(YAML::EmitterStyle::Flow);
      for (int flag : parsed.pattern) list.push_back(flag);
      m["moe_layer_freq"] = list;
    } else {
      m["moe_layer_freq"] = parsed.every;
    }
  }
  m["moe_grouped_gemm"] = r.Switch("moe-grouped-gemm");
  m["moe_permute_fusion"] = r.Switch("moe-permute-fusion");
  m["moe_router_force_load_balancing"] = r.Switch("moe-router-force-load-balancing");
  MEMTUNE_TRY(auto dispatcher,
              r.Choice("moe-token-dispatcher-type", {"allgather", "alltoall", "flex"}));
  m["moe_token_dispatcher_type"] = dispatcher.value_or("allgather");
  m["moe_router_enable_expert_bias"] = r.Switch("moe-router-enable-expert-bias");
  m["moe_shared_expert_gate"] = r.Switch("moe-shared-expert-gate");
  m["moe_shared_expert_overlap"] = r.Switch("moe-shared-expert-overlap");
  MEMTUNE_TRY(auto capacity, r.Float("moe-expert-capacity-factor"));
  if (capacity) m["moe_expert_capacity_factor"] = ShortestNumberNode(*capacity);
  return OkStatus();
}

// MLA: arguments.py defaults q_lora_rank None, kv_lora_rank 32, qk 128, rope 64, v 128.
Status Mla(const FlagReader& r, YAML::Node& m) {
  if (r.Switch("multi-latent-attention")) {
    m["multi_latent_attention"] = true;
    MEMTUNE_TRY(auto q_lora, r.Int("q-lora-rank"));
    m["q_lora_rank"] = q_lora ? YAML::Node(*q_lora) : YAML::Node(YAML::NodeType::Null);
    for (const auto& [flag, field, fallback] : {std::tuple{"kv-lora-rank", "kv_lora_rank", 32},
                                                {"qk-head-dim", "qk_head_dim", 128},
                                                {"qk-pos-emb-head-dim", "qk_pos_emb_head_dim", 64},
                                                {"v-head-dim", "v_head_dim", 128}}) {
      MEMTUNE_TRY(auto value, r.Int(flag));
      m[field] = value.value_or(fallback);
    }
  }
  return CopyInt(r, m, "mtp-num-layers", "mtp_num_layers");
}

// VPP from --num-layers-per-virtual-pipeline-stage (layers per stage / N, where the split
// counts the embedding and loss when asked) or --num-virtual-stages-per-pipeline-rank; a
// size of 1 means none (validate_args).
Status VirtualPipeline(const FlagReader& r, YAML::Node& m, std::int64_t pp) {
  MEMTUNE_TRY(auto stages, r.Int("num-virtual-stages-per-pipeline-rank"));
  if (!stages) {
    MEMTUNE_TRY(stages, r.Int("virtual-pipeline-model-parallel-size"));
  }
  MEMTUNE_TRY(auto per_stage, r.Int("num-layers-per-virtual-pipeline-stage"));
  if (per_stage && *per_stage <= 0) {  // validate_args divides the stage's layers by it
    return InvalidInput("--num-layers-per-virtual-pipeline-stage",
                        std::to_string(*per_stage) + " is not allowed; allowed: 1 or more");
  }
  // Past the layer limit the range check on num_layers reports it (and the sum cannot wrap).
  if (per_stage && m["num_layers"] && pp > 0 &&
      m["num_layers"].as<std::int64_t>() <= internal::kMaxLayers) {
    std::int64_t layers = m["num_layers"].as<std::int64_t>();
    layers += (r.Switch("account-for-embedding-in-pipeline-split") ? 1 : 0) +
              (r.Switch("account-for-loss-in-pipeline-split") ? 1 : 0);
    if (layers % pp != 0 || (layers / pp) % *per_stage != 0) {
      return InvalidConfig("--num-layers-per-virtual-pipeline-stage",
                           std::to_string(*per_stage) + " does not divide the " +
                               std::to_string(layers) + " layers into " + std::to_string(pp) +
                               " pipeline stages evenly");
    }
    stages = layers / pp / *per_stage;
  }
  if (stages && *stages > 1) m["virtual_pipeline_model_parallel_size"] = *stages;
  return OkStatus();
}

Status Parallel(const FlagReader& r, YAML::Node& m) {
  for (const auto& [flag, field] :
       {std::pair{"tensor-model-parallel-size", "tensor_model_parallel_size"},
        {"pipeline-model-parallel-size", "pipeline_model_parallel_size"},
        {"context-parallel-size", "context_parallel_size"},
        {"expert-model-parallel-size", "expert_model_parallel_size"},
        {"expert-tensor-parallel-size", "expert_tensor_parallel_size"},
        {"decoder-first-pipeline-num-layers", "num_layers_in_first_pipeline_stage"},
        {"decoder-last-pipeline-num-layers", "num_layers_in_last_pipeline_stage"},
        {"microbatch-group-size-per-virtual-pipeline-stage", "microbatch_group_size_per_vp_stage"},
        {"wgrad-deferral-limit", "wgrad_deferral_limit"}}) {
    MEMTUNE_RETURN_IF_ERROR(CopyInt(r, m, flag, field));
  }
  const std::int64_t pp =
      m["pipeline_model_parallel_size"] ? m["pipeline_model_parallel_size"].as<std::int64_t>() : 1;
  MEMTUNE_RETURN_IF_ERROR(VirtualPipeline(r, m, pp));
  if (const std::string* layout = r.Value("pipeline-model-parallel-layout")) {
    m["pipeline_model_parallel_layout"] = *layout;
  }
  for (const auto& [flag, field] :
       {std::pair{"sequence-parallel", "sequence_parallel"},
        {"account-for-embedding-in-pipeline-split", "account_for_embedding_in_pipeline_split"},
        {"account-for-loss-in-pipeline-split", "account_for_loss_in_pipeline_split"},
        {"tp-comm-overlap", "tp_comm_overlap"},
        {"overlap-moe-expert-parallel-comm", "overlap_moe_expert_parallel_comm"},
        {"defer-embedding-wgrad-compute", "defer_embedding_wgrad_compute"}}) {
    if (r.Switch(flag)) m[field] = true;
  }
  // arguments.py: batch_p2p_comm = not overlap_p2p_comm, and --no-overlap-p2p-communication
  // turns the (interleaved) overlap off.
  if (r.Switch("no-overlap-p2p-communication")) m["batch_p2p_comm"] = true;
  if (r.Switch("overlap-p2p-communication")) m["batch_p2p_comm"] = false;
  // arguments.py: --no-gradient-accumulation-fusion (store_false, default on).
  if (r.Switch("no-gradient-accumulation-fusion")) m["gradient_accumulation_fusion"] = false;
  // arguments.py validate_args: "Disabling sequence parallelism because tensor model
  // parallelism is disabled" (TP 1 turns sequence_parallel off).
  if (!m["tensor_model_parallel_size"] || m["tensor_model_parallel_size"].as<std::int64_t>() == 1) {
    m.remove("sequence_parallel");
  }
  // arguments.py validate_args: without --seq-length, seq_length = encoder_seq_length.
  return CopyInt(r, m, r.Value("seq-length") ? "seq-length" : "encoder-seq-length", "seq_length");
}

// --recompute-activations is selective recompute (validate_args).
Status Levers(const FlagReader& r, YAML::Node& m) {
  MEMTUNE_TRY(auto granularity, r.Choice("recompute-granularity", {"full", "selective"}));
  if (!granularity && r.Switch("recompute-activations")) granularity = "selective";
  if (granularity) m["recompute_granularity"] = *granularity;
  MEMTUNE_RETURN_IF_ERROR(
      CopyChoice(r, m, "recompute-method", "recompute_method", {"uniform", "block"}));
  MEMTUNE_RETURN_IF_ERROR(CopyInt(r, m, "recompute-num-layers", "recompute_num_layers"));
  for (const auto& [flag, field] : {std::pair{"recompute-modules", "recompute_modules"},
                                    {"offload-modules", "offload_modules"},
                                    {"cuda-graph-scope", "cuda_graph_scope"}}) {
    if (const auto* items = r.List(flag)) m[field] = Flow(*items);
  }
  for (const auto& [flag, field] :
       {std::pair{"distribute-saved-activations", "distribute_saved_activations"},
        {"cpu-offloading", "cpu_offloading"},
        {"cpu-offloading-weights", "cpu_offloading_weights"},
        {"fine-grained-activation-offloading", "fine_grained_activation_offloading"}}) {
    if (r.Switch(flag)) m[field] = true;
  }
  // arguments.py: --cross-entropy-loss-fusion is store_true (Bridge's provider default is on).
  m["cross_entropy_loss_fusion"] = r.Switch("cross-entropy-loss-fusion");
  if (r.Switch("no-cpu-offloading-activations") || r.Switch("disable-cpu-offloading-activations")) {
    m["cpu_offloading_activations"] = false;
  }
  MEMTUNE_RETURN_IF_ERROR(CopyInt(r, m, "cpu-offloading-num-layers", "cpu_offloading_num_layers"));
  MEMTUNE_RETURN_IF_ERROR(CopyChoice(r, m, "cuda-graph-impl", "cuda_graph_impl",
                                     {"none", "local", "transformer_engine", "full_iteration"}));
  MEMTUNE_RETURN_IF_ERROR(CopyChoice(r, m, "attention-backend", "attention_backend",
                                     {"auto", "flash", "fused", "unfused", "local"}));
  MEMTUNE_RETURN_IF_ERROR(
      CopyChoice(r, m, "transformer-impl", "transformer_impl", {"transformer_engine", "local"}));
  // arguments.py: --no-masked-softmax-fusion (store_false, default on) and
  // --attention-softmax-in-fp32 (store_true; validate_args forces it on with fp16).
  if (r.Switch("no-masked-softmax-fusion")) m["masked_softmax_fusion"] = false;
  if (r.Switch("attention-softmax-in-fp32") || r.Switch("fp16")) {
    m["attention_softmax_in_fp32"] = true;
  }
  return CopyChoice(r, m, "cross-entropy-fusion-impl", "cross_entropy_fusion_impl",
                    {"native", "te"});
}

Result<YAML::Node> BuildModel(const FlagReader& r) {
  YAML::Node m(YAML::NodeType::Map);
  MEMTUNE_RETURN_IF_ERROR(Architecture(r, m));
  MEMTUNE_RETURN_IF_ERROR(Moe(r, m));
  MEMTUNE_RETURN_IF_ERROR(Mla(r, m));
  MEMTUNE_RETURN_IF_ERROR(Parallel(r, m));
  MEMTUNE_RETURN_IF_ERROR(Levers(r, m));
  return m;
}

}  // namespace

// Defined in megatron_args_sections.cc: train, optimizer, ddp, mixed_precision, memtune.
Status AddRunSections(const MegatronFlags& flags, YAML::Node& job);

Result<YAML::Node> BuildMegatronJob(const MegatronFlags& flags) {
  const FlagReader reader(flags);
  YAML::Node job(YAML::NodeType::Map);
  MEMTUNE_TRY(job["model"], BuildModel(reader));
  MEMTUNE_RETURN_IF_ERROR(AddRunSections(flags, job));
  return job;
}

}  // namespace memtune::model::internal
