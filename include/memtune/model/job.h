// The job: one training run (model, parallel layout, training settings, hardware).
//
// The struct mirrors the job document of docs/job-format.md, which follows
// Megatron-Bridge's ConfigContainer section and field names (model, train, optimizer,
// ddp, mixed_precision, peft, dataset) plus memtune's own `memtune:` section. A Job holds
// *effective* values: it is what ResolveJob (model/job_spec.h) makes of the job as declared
// (JobSpec): Bridge's rules applied (distributed-optimizer sync, mixed-precision preset
// copied onto model, optimizer and ddp), derived fields computed, and every absent field
// at its Megatron-Core/Bridge default. The section types a Job and a JobSpec share are the
// *Base structs and OptimizerConfig, DdpConfig, PeftConfig; see docs/job.md §6.
// Field names are Bridge's, so the document path of a field is "<section>.<name>".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace memtune::model {

// Storage dtype of a tensor family.
enum class Dtype { kFp32, kBf16, kFp16, kFp8, kFp4 };

// Bytes per element (kFp4 counts as 1: packed pairs are ignored at this level, callers
// that model fp4 packing say so).
int DtypeBytes(Dtype dtype);
// "fp32", "bf16", "fp16", "fp8", "fp4".
const char* DtypeName(Dtype dtype);

enum class Normalization { kLayerNorm, kRMSNorm };
// Attention softmax (MCore TransformerConfig.softmax_type): "vanilla" | "off_by_one" |
// "learnable". Learnable (GPT-OSS sinks) adds one parameter per attention head per layer.
enum class SoftmaxType { kVanilla, kOffByOne, kLearnable };
// Position embedding (Bridge GPTModelProvider.position_embedding_type): "learned_absolute" |
// "rope" | "yarn" | "mrope" | "none". Only learned_absolute adds a parameter table.
enum class PositionEmbedding { kLearnedAbsolute, kRope, kYarn, kMrope, kNone };
// MoE token dispatcher (MCore moe_token_dispatcher_type): "allgather" | "alltoall" | "flex".
enum class MoeTokenDispatcher { kAllgather, kAlltoall, kFlex };
// Fused cross-entropy implementation (MCore cross_entropy_fusion_impl): "native" | "te".
enum class CrossEntropyFusionImpl { kNative, kTe };
// CUDA-graph implementation (MCore TransformerConfig.cuda_graph_impl): "none" | "local" |
// "transformer_engine" | "full_iteration".
enum class CudaGraphImpl { kNone, kLocal, kTransformerEngine, kFullIteration };
// Core attention backend (MCore TransformerConfig.attention_backend, enum AttnBackend):
// "auto" | "flash" | "fused" | "unfused" | "local".
enum class AttentionBackend { kAuto, kFlash, kFused, kUnfused, kLocal };
// Layer spec (Megatron-LM --transformer-impl): "transformer_engine" | "local".
enum class TransformerImpl { kTransformerEngine, kLocal };
// FP8 format (TransformerConfig.fp8): null (kNone, FP8 off) | "hybrid" | "e4m3".
enum class Fp8Format { kNone, kHybrid, kE4m3 };
// FP8 scaling recipe (TransformerConfig.fp8_recipe, MixedPrecisionConfig.fp8_recipe): null
// (kNone) | "tensorwise" | "delayed" | "mxfp8" | "blockwise" | "custom".
enum class Fp8Recipe { kNone, kTensorwise, kDelayed, kMxfp8, kBlockwise, kCustom };
// FP4 format (TransformerConfig.fp4): null (kNone, FP4 off) | "e2m1".
enum class Fp4Format { kNone, kE2m1 };
// Optimizer (Bridge OptimizerConfig.optimizer): "adam" | "sgd".
enum class Optimizer { kAdam, kSgd };
// Megatron-FSDP sharding (MCore DistributedDataParallelConfig.data_parallel_sharding_strategy):
// "no_shard" | "optim" | "optim_grads" | "optim_grads_params".
enum class ShardingStrategy { kNoShard, kOptim, kOptimGrads, kOptimGradsParams };
// PEFT method (Bridge peft._target_ LoRA / DoRA): "lora" | "dora".
enum class PeftMethod { kLora, kDora };
// FSDP2 activation checkpointing (torchtitan ActivationCheckpoint.mode, with selective's
// option split): "none" | "selective_op" | "selective_layer" | "full".
enum class Fsdp2Checkpoint { kNone, kSelectiveOp, kSelectiveLayer, kFull };
// torchtitan's pipeline schedule under FSDP2 (parallelism.pipeline_parallel_schedule; the
// schedules of torch.distributed.pipelining): "1F1B" | "GPipe" | "Interleaved1F1B".
enum class Fsdp2PipelineSchedule { k1F1B, kGPipe, kInterleaved1F1B };

// One document spelling of a closed-set enum value.
template <typename E>
struct EnumName {
  const char* name;
  E value;
};

// The name table of each closed-set enum, in the order error messages list them ("allowed:
// vanilla, off_by_one, learnable"). The one table serves the parser, `memtune job` and the
// checks' messages. The argument only selects the enum.
std::span<const EnumName<SoftmaxType>> EnumNames(SoftmaxType);
std::span<const EnumName<PositionEmbedding>> EnumNames(PositionEmbedding);
std::span<const EnumName<MoeTokenDispatcher>> EnumNames(MoeTokenDispatcher);
std::span<const EnumName<CrossEntropyFusionImpl>> EnumNames(CrossEntropyFusionImpl);
std::span<const EnumName<CudaGraphImpl>> EnumNames(CudaGraphImpl);
std::span<const EnumName<AttentionBackend>> EnumNames(AttentionBackend);
std::span<const EnumName<TransformerImpl>> EnumNames(TransformerImpl);
// The kNone values of Fp8Format, Fp8Recipe and Fp4Format have no name: they are null.
std::span<const EnumName<Fp8Format>> EnumNames(Fp8Format);
std::span<const EnumName<Fp8Recipe>> EnumNames(Fp8Recipe);
std::span<const EnumName<Fp4Format>> EnumNames(Fp4Format);
std::span<const EnumName<Optimizer>> EnumNames(Optimizer);
std::span<const EnumName<ShardingStrategy>> EnumNames(ShardingStrategy);
std::span<const EnumName<PeftMethod>> EnumNames(PeftMethod);
std::span<const EnumName<Fsdp2Checkpoint>> EnumNames(Fsdp2Checkpoint);
std::span<const EnumName<Fsdp2PipelineSchedule>> EnumNames(Fsdp2PipelineSchedule);

// The document spelling of `value`, e.g. NameOf(MoeTokenDispatcher::kAlltoall) == "alltoall".
template <typename E>
const char* NameOf(E value) {
  for (const EnumName<E>& entry : EnumNames(E{})) {
    if (entry.value == value) return entry.name;
  }
  return "";
}
enum class RecomputeGranularity { kNone, kSelective, kFull };
enum class RecomputeMethod { kNone, kUniform, kBlock };
enum class Framework { kMegatron, kFsdp2 };

// model: architecture, parallel layout, memory levers (Bridge GPTModelProvider fields):
// the fields a JobSpec and a Job share. The fields whose default depends on other fields
// are in ModelConfig (effective) and ModelSpec (declared, model/job_spec.h).
struct ModelBase {
  std::string preset;     // memtune catalog entry the architecture came from, or ""
  std::string hf_config;  // path of a Hugging Face config.json it came from, or ""

  // Architecture.
  std::int64_t num_layers = 0;
  std::int64_t hidden_size = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t vocab_size = 0;
  std::int64_t make_vocab_size_divisible_by = 128;
  bool should_pad_vocab = false;
  bool share_embeddings_and_output_weights = true;  // GPTModelProvider default
  bool gated_linear_unit = false;
  // Fused bias + activation (fused_bias_swiglu / bias_gelu / weighted swiglu in experts).
  // Unfused, the activation's intermediates are saved too (docs/estimator.md §4).
  bool bias_activation_fusion = true;
  // Transformer Engine's activation ops (te.pytorch.ops.SwiGLU, GELU, ...) in the MLP and the
  // experts, which keep only their input, whatever bias_activation_fusion says.
  bool use_te_activation_func = false;
  std::string activation_func = "gelu";  // silu | gelu | quick_gelu | relu | squared_relu
  Normalization normalization = Normalization::kLayerNorm;
  bool add_bias_linear = true;
  bool add_qkv_bias = false;
  bool qk_layernorm = false;
  // Gemma 2 / 3: an RMSNorm on the outputs of linear_proj and linear_fc2 (Bridge
  // gemma2_layer_spec / gemma3_layer_spec: TERowParallelLinearLayerNorm's post_layernorm).
  bool sublayer_post_norms = false;
  // Gemma 2: logits = cap * tanh(logits / cap) (Bridge Gemma2OutputLayer); unset = none.
  std::optional<double> final_logit_softcapping;
  double hidden_dropout = 0.1;  // MCore default; Bridge recipes set 0
  double attention_dropout = 0.1;
  PositionEmbedding position_embedding_type = PositionEmbedding::kLearnedAbsolute;
  SoftmaxType softmax_type = SoftmaxType::kVanilla;

  // MoE.
  std::optional<std::int64_t> num_moe_experts;
  std::int64_t moe_router_topk = 2;
  std::optional<std::int64_t> moe_ffn_hidden_size;  // default ffn_hidden_size
  std::optional<std::int64_t> moe_shared_expert_intermediate_size;
  bool moe_shared_expert_gate = false;
  bool moe_shared_expert_overlap = false;
  std::vector<int> moe_layer_freq = {1};  // one int (every k-th layer) or a 0/1 flag per layer
  bool moe_layer_freq_is_list = false;
  bool moe_grouped_gemm = false;
  // TE's fused permutation (moe_permute_fusion): its int32 row map replaces the unfused
  // path's int64 sorted indices as what the permutation keeps for backward.
  bool moe_permute_fusion = false;
  MoeTokenDispatcher moe_token_dispatcher_type = MoeTokenDispatcher::kAllgather;
  std::optional<std::int64_t> moe_latent_size;
  bool moe_router_enable_expert_bias = false;
  std::optional<double> moe_expert_capacity_factor;
  // MCore router.py: random router logits for benchmarking, which balance the experts' loads
  // (memtune then assumes no routing spread, tensors/moe_load.h).
  bool moe_router_force_load_balancing = false;

  // MLA (DeepSeek).
  bool multi_latent_attention = false;
  std::int64_t kv_lora_rank = 512;
  std::int64_t qk_head_dim = 128;
  std::int64_t qk_pos_emb_head_dim = 64;
  std::int64_t v_head_dim = 128;

  std::optional<std::int64_t> mtp_num_layers;

  // Parallel layout.
  int tensor_model_parallel_size = 1;
  int pipeline_model_parallel_size = 1;
  std::optional<int> virtual_pipeline_model_parallel_size;
  int context_parallel_size = 1;
  int expert_model_parallel_size = 1;
  std::optional<int> expert_tensor_parallel_size;  // default tensor_model_parallel_size
  bool sequence_parallel = false;
  std::optional<int> microbatch_group_size_per_vp_stage;  // default pipeline size
  bool account_for_embedding_in_pipeline_split = false;
  bool account_for_loss_in_pipeline_split = false;
  std::optional<int> num_layers_in_first_pipeline_stage;
  std::optional<int> num_layers_in_last_pipeline_stage;
  std::string pipeline_model_parallel_layout;  // "" = none
  std::int64_t seq_length = 0;
  // model.seq_length as the job wrote it when dataset.seq_length differs (seq_length is
  // the dataset's, the length of the real batches); 0 when they agree or only one is
  // given. Check rule "layout.seq-length-mismatch" reports it.
  std::int64_t written_model_seq_length = 0;
  bool overlap_moe_expert_parallel_comm = false;
  bool tp_comm_overlap = false;
  // Pipeline send/recv batched on the pipeline group (MCore ModelParallelConfig
  // batch_p2p_comm). Unset: batched without interleaving, single isend/irecv with it, as
  // Bridge's comm_overlap.py and Megatron-LM's arguments.py set it for VPP (one NCCL
  // communicator per peer: docs/non-pytorch.md).
  std::optional<bool> batch_p2p_comm;
  bool defer_embedding_wgrad_compute = false;
  int wgrad_deferral_limit = 0;  // micro-batches whose output-layer wgrad is deferred; 0 = all
  // Weight gradients accumulate straight into the DDP grad buffer (main_grad); off, each
  // linear's backward returns a weight-sized gradient that MCore's DDP hook adds and frees.
  bool gradient_accumulation_fusion = true;

  // Memory levers.
  RecomputeGranularity recompute_granularity = RecomputeGranularity::kNone;
  RecomputeMethod recompute_method = RecomputeMethod::kNone;
  std::optional<int> recompute_num_layers;
  std::vector<std::string> recompute_modules = {"core_attn"};  // used only with selective
  bool distribute_saved_activations = false;
  bool cpu_offloading = false;
  int cpu_offloading_num_layers = 0;
  bool cpu_offloading_activations = true;
  bool cpu_offloading_weights = false;
  bool fine_grained_activation_offloading = false;
  std::vector<std::string> offload_modules;
  CudaGraphImpl cuda_graph_impl = CudaGraphImpl::kNone;
  std::vector<std::string> cuda_graph_scope;
  bool cross_entropy_loss_fusion = false;
  // Core attention: TE picks flash or cuDNN fused attention under "auto"; "unfused" (TE's
  // UnfusedDotProductAttention) and "local" (MCore DotProductAttention) materialize the
  // [b, heads, s, s] scores (MCore TransformerConfig.attention_backend / transformer_impl).
  AttentionBackend attention_backend = AttentionBackend::kAuto;
  TransformerImpl transformer_impl = TransformerImpl::kTransformerEngine;
  bool masked_softmax_fusion = true;       // local unfused attention's fused softmax kernel
  bool attention_softmax_in_fp32 = false;  // local unfused attention's torch softmax in fp32
  CrossEntropyFusionImpl cross_entropy_fusion_impl = CrossEntropyFusionImpl::kNative;

  // Precision (effective: the mixed-precision preset has been applied).
  bool bf16 = false;
  bool fp16 = false;
  Dtype params_dtype = Dtype::kFp32;
  Fp8Format fp8 = Fp8Format::kNone;
  Fp8Recipe fp8_recipe = Fp8Recipe::kNone;
  bool fp8_param = false;
  bool fp8_param_gather = false;
  Fp4Format fp4 = Fp4Format::kNone;
  bool fp4_param = false;
  bool first_last_layers_bf16 = false;
  int num_layers_at_start_in_bf16 = 0;
  int num_layers_at_end_in_bf16 = 0;

  bool operator==(const ModelBase&) const = default;
};

// The effective model section: ModelBase plus the derived fields, resolved.
struct ModelConfig : ModelBase {
  std::int64_t ffn_hidden_size = 0;          // derived default 4 * hidden_size
  std::int64_t num_query_groups = 0;         // KV heads; derived default num_attention_heads
  std::int64_t kv_channels = 0;              // head dim; derived default hidden_size / heads
  std::int64_t max_position_embeddings = 0;  // only for learned_absolute; default seq_length
  Dtype pipeline_dtype = Dtype::kFp32;       // default params_dtype (or the precision preset's)
  std::optional<std::int64_t> q_lora_rank;   // MLA only; derived default 512, nullopt = none

  bool operator==(const ModelConfig&) const = default;
};

// train: batch sizes. TrainBase holds the declared ones; TrainConfig the effective.
struct TrainBase {
  std::int64_t micro_batch_size = 1;

  bool operator==(const TrainBase&) const = default;
};
struct TrainConfig : TrainBase {
  std::int64_t global_batch_size = 1;  // derived default micro_batch_size * data-parallel size

  bool operator==(const TrainConfig&) const = default;
};

// optimizer: Bridge OptimizerConfig fields that change memory.
struct OptimizerConfig {
  Optimizer optimizer = Optimizer::kAdam;
  bool use_distributed_optimizer = false;
  bool use_precision_aware_optimizer = false;
  Dtype main_params_dtype = Dtype::kFp32;
  Dtype main_grads_dtype = Dtype::kFp32;
  Dtype exp_avg_dtype = Dtype::kFp32;
  Dtype exp_avg_sq_dtype = Dtype::kFp32;
  bool optimizer_cpu_offload = false;
  double optimizer_offload_fraction = 1.0;  // in [0, 1]
  // Step time only (steptime/step_time.h): the CPU optimizer's D2H / H2D copies overlap its
  // compute; the distributed optimizer's parameter all-gather overlaps the optimizer step.
  bool overlap_cpu_optimizer_d2h_h2d = false;
  bool overlap_param_gather_with_optimizer_step = false;
  bool bf16 = false;  // effective (from mixed precision)
  bool fp16 = false;

  bool operator==(const OptimizerConfig&) const = default;
};

// ddp: Bridge DistributedDataParallelConfig fields that change memory.
struct DdpConfig {
  bool grad_reduce_in_fp32 = false;
  bool use_distributed_optimizer = false;
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  bool use_megatron_fsdp = false;
  ShardingStrategy data_parallel_sharding_strategy = ShardingStrategy::kNoShard;
  int num_distributed_optimizer_instances = 1;
  std::optional<std::int64_t> bucket_size;  // elements; default max(40M, 1M * dp) with dist-opt
  bool average_in_collective = false;
  bool nccl_ub = false;  // --use-nccl-ub: NCCL user-buffer registration
  // MXFP8 param all-gather reuses the grad buffer (Bridge bf16_with_mxfp8_mixed sets it;
  // MCore DistributedDataParallelConfig.reuse_grad_buf_for_mxfp8_param_ag).
  bool reuse_grad_buf_for_mxfp8_param_ag = false;

  bool operator==(const DdpConfig&) const = default;
};

// peft: LoRA / DoRA.
struct PeftConfig {
  PeftMethod method = PeftMethod::kLora;
  std::int64_t dim = 32;
  double alpha = 32;
  std::vector<std::string> target_modules = {"linear_qkv", "linear_proj", "linear_fc1",
                                             "linear_fc2"};
  bool sequence_parallel_input_regather = false;
  // MoE expert linears (Bridge peft/lora.py @067f987d): the rank dim / moe_router_topk on
  // experts; one adapter shared by a rank's local experts, or one per expert; shared-outer
  // (fc1's A and fc2's B shared, the other side per expert).
  bool normalize_moe_lora = false;
  bool share_expert_adapters = true;
  bool experts_shared_outer_loras = false;

  bool operator==(const PeftConfig&) const = default;
};

// memtune.fsdp2: torchtitan-style FSDP2 runs.
struct Fsdp2Config {
  int shard_degree = 0;  // 0 = world / (tp * pp * cp)
  // torchtitan's "default" policy: true, false under pipeline parallelism (set when the
  // document leaves it out; torchtitan distributed fsdp.py, v0.2.2 apply_fsdp).
  bool reshard_after_forward = true;
  Fsdp2PipelineSchedule pipeline_schedule = Fsdp2PipelineSchedule::k1F1B;
  Dtype param_dtype = Dtype::kBf16;
  Dtype reduce_dtype = Dtype::kFp32;
  Fsdp2Checkpoint activation_checkpoint = Fsdp2Checkpoint::kNone;
  bool float8 = false;
  bool compile = false;
  // torch.compile the cross-entropy loss too: torchtitan does so whenever it compiles the
  // model since bbb1b616e (2025-04-02); 9dec370 (its Dec-2024 benchmarks) ran it eagerly.
  bool compile_loss = false;

  bool operator==(const Fsdp2Config&) const = default;
};

// Which Adam (or SGD) implementation Megatron's optimizer/__init__.py ends up with:
// TE's or Apex's FusedAdam ("fused"), else PyTorch's AdamW, which picks its foreach
// implementation for CUDA parameters ("foreach"; torch/optim/optimizer.py
// _default_to_fused_or_foreach) unless foreach=False ("for_loop").
enum class OptimizerImpl { kFused, kForeach, kForLoop };

// memtune: hardware and launch environment. MemtuneBase holds the fields a JobSpec and a
// Job share; MemtuneSection adds the derived world size.
// memtune.versions: versions of the libraries the run uses, where memory depends on them.
struct VersionsConfig {
  std::string nccl;  // "MAJOR.MINOR[.PATCH]"; "" = 2.27.7 (docs/non-pytorch.md)
  // Megatron-Core "MAJOR.MINOR[.PATCH]" the run used; "" = the newest (Megatron-LM
  // d98e8a64). --mode megatron-lm follows the theoretical_memory_usage.py of that version
  // (docs/estimator-compat.md "Versions").
  std::string megatron_core;
  // Transformer Engine "MAJOR.MINOR[.PATCH]"; "" = the newest (2.20, TE d0067d0d): the
  // weight-gradient placeholders (model/versions.h TeCachesDummyWgrad).
  std::string transformer_engine;
  // PyTorch "MAJOR.MINOR" whose allocator rules the forecast follows when the caller names
  // none (memtune estimate --torch-version wins); "" = 2.9 (alloc/config.h).
  std::string torch;

  bool operator==(const VersionsConfig&) const = default;
};

struct MemtuneBase {
  Framework framework = Framework::kMegatron;
  std::string gpu;                               // GPU catalog name, or ""
  std::optional<std::int64_t> gpu_memory_bytes;  // overrides the catalog's capacity
  int gpus_per_node = 8;
  std::map<std::string, std::string> env;  // launch environment (PYTORCH_CUDA_ALLOC_CONF, ...)
  Fsdp2Config fsdp2;
  VersionsConfig versions;
  // The optimizer step's temporaries depend on it (tensors/model_state.h step_workspace).
  OptimizerImpl optimizer_implementation = OptimizerImpl::kFused;
  // Spread of the MoE experts' token loads per micro-batch and layer (the standard deviation
  // of the log-load, tensors/moe_load.h); unset: model::RoutingSpread's default.
  std::optional<double> moe_routing_spread;
  std::string recipe;  // the Bridge recipe the job starts from (model/recipes.h), or ""
  // memtune.torchtitan: torchtitan JobConfig settings by dotted name
  // ("parallelism.enable_async_tensor_parallel" -> "true"; lists joined by ','). Memory
  // does not read them, nor does the step-time model (docs/step-time.md).
  std::map<std::string, std::string> torchtitan;

  bool operator==(const MemtuneBase&) const = default;
};
struct MemtuneSection : MemtuneBase {
  int world_size = 0;  // GPUs; derived default tp*pp*cp (data-parallel size 1)

  bool operator==(const MemtuneSection&) const = default;
};

// A whole job with effective values: what ResolveJob (model/job_spec.h) makes of a JobSpec.
// Compares field by field (defaulted ==).
struct Job {
  ModelConfig model;
  TrainConfig train;
  OptimizerConfig optimizer;
  DdpConfig ddp;
  std::optional<PeftConfig> peft;              // absent = full training
  std::string mixed_precision = "bf16_mixed";  // preset name, "custom" for a mapping, "" none
  MemtuneSection memtune;

  bool operator==(const Job&) const = default;
};

// Data-parallel size: world / (TP * PP * CP). Bridge's data_parallel_size (excludes CP).
int DataParallelSize(const Job& job);
// Expert tensor-parallel size: ETP, default TP.
int ExpertTensorParallelSize(const Job& job);
// Expert data-parallel size: world / (PP * EP * ETP).
int ExpertDataParallelSize(const Job& job);
// Micro-batches per step and DP rank: GBS / (MBS * DP).
std::int64_t NumMicrobatches(const Job& job);
// Padded vocabulary (Megatron calculate_padded_vocab_size when should_pad_vocab).
std::int64_t PaddedVocabSize(const Job& job);

}  // namespace memtune::model
