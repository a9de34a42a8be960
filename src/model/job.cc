// Derived quantities of a job's layout.
#include "memtune/model/job.h"

namespace memtune::model {

int DtypeBytes(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFp32:
      return 4;
    case Dtype::kBf16:
    case Dtype::kFp16:
      return 2;
    case Dtype::kFp8:
    case Dtype::kFp4:
      return 1;
  }
  return 4;
}

const char* DtypeName(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFp32:
      return "fp32";
    case Dtype::kBf16:
      return "bf16";
    case Dtype::kFp16:
      return "fp16";
    case Dtype::kFp8:
      return "fp8";
    case Dtype::kFp4:
      return "fp4";
  }
  return "fp32";
}

std::span<const EnumName<SoftmaxType>> EnumNames(SoftmaxType) {
  static constexpr EnumName<SoftmaxType> kNames[] = {{"vanilla", SoftmaxType::kVanilla},
                                                     {"off_by_one", SoftmaxType::kOffByOne},
                                                     {"learnable", SoftmaxType::kLearnable}};
  return kNames;
}

std::span<const EnumName<PositionEmbedding>> EnumNames(PositionEmbedding) {
  static constexpr EnumName<PositionEmbedding> kNames[] = {
      {"learned_absolute", PositionEmbedding::kLearnedAbsolute},
      {"rope", PositionEmbedding::kRope},
      {"yarn", PositionEmbedding::kYarn},
      {"mrope", PositionEmbedding::kMrope},
      {"none", PositionEmbedding::kNone}};
  return kNames;
}

std::span<const EnumName<MoeTokenDispatcher>> EnumNames(MoeTokenDispatcher) {
  static constexpr EnumName<MoeTokenDispatcher> kNames[] = {
      {"allgather", MoeTokenDispatcher::kAllgather},
      {"alltoall", MoeTokenDispatcher::kAlltoall},
      {"flex", MoeTokenDispatcher::kFlex}};
  return kNames;
}

std::span<const EnumName<CrossEntropyFusionImpl>> EnumNames(CrossEntropyFusionImpl) {
  static constexpr EnumName<CrossEntropyFusionImpl> kNames[] = {
      {"native", CrossEntropyFusionImpl::kNative}, {"te", CrossEntropyFusionImpl::kTe}};
  return kNames;
}

std::span<const EnumName<CudaGraphImpl>> EnumNames(CudaGraphImpl) {
  static constexpr EnumName<CudaGraphImpl> kNames[] = {
      {"none", CudaGraphImpl::kNone},
      {"local", CudaGraphImpl::kLocal},
      {"transformer_engine", CudaGraphImpl::kTransformerEngine},
      {"full_iteration", CudaGraphImpl::kFullIteration}};
  return kNames;
}

std::span<const EnumName<AttentionBackend>> EnumNames(AttentionBackend) {
  static constexpr EnumName<AttentionBackend> kNames[] = {{"auto", AttentionBackend::kAuto},
                                                          {"flash", AttentionBackend::kFlash},
                                                          {"fused", AttentionBackend::kFused},
                                                          {"unfused", AttentionBackend::kUnfused},
                                                          {"local", AttentionBackend::kLocal}};
  return kNames;
}

std::span<const EnumName<TransformerImpl>> EnumNames(TransformerImpl) {
  static constexpr EnumName<TransformerImpl> kNames[] = {
      {"transformer_engine", TransformerImpl::kTransformerEngine},
      {"local", TransformerImpl::kLocal}};
  return kNames;
}

std::span<const EnumName<Fp8Format>> EnumNames(Fp8Format) {
  static constexpr EnumName<Fp8Format> kNames[] = {{"hybrid", Fp8Format::kHybrid},
                                                   {"e4m3", Fp8Format::kE4m3}};
  return kNames;
}

std::span<const EnumName<Fp8Recipe>> EnumNames(Fp8Recipe) {
  static constexpr EnumName<Fp8Recipe> kNames[] = {{"tensorwise", Fp8Recipe::kTensorwise},
                                                   {"delayed", Fp8Recipe::kDelayed},
                                                   {"mxfp8", Fp8Recipe::kMxfp8},
                                                   {"blockwise", Fp8Recipe::kBlockwise},
                                                   {"custom", Fp8Recipe::kCustom}};
  return kNames;
}

std::span<const EnumName<Fp4Format>> EnumNames(Fp4Format) {
  static constexpr EnumName<Fp4Format> kNames[] = {{"e2m1", Fp4Format::kE2m1}};
  return kNames;
}

std::span<const EnumName<Optimizer>> EnumNames(Optimizer) {
  static constexpr EnumName<Optimizer> kNames[] = {{"adam", Optimizer::kAdam},
                                                   {"sgd", Optimizer::kSgd}};
  return kNames;
}

std::span<const EnumName<ShardingStrategy>> EnumNames(ShardingStrategy) {
  static constexpr EnumName<ShardingStrategy> kNames[] = {
      {"no_shard", ShardingStrategy::kNoShard},
      {"optim", ShardingStrategy::kOptim},
      {"optim_grads", ShardingStrategy::kOptimGrads},
      {"optim_grads_params", ShardingStrategy::kOptimGradsParams}};
  return kNames;
}

std::span<const EnumName<PeftMethod>> EnumNames(PeftMethod) {
  static constexpr EnumName<PeftMethod> kNames[] = {{"lora", PeftMethod::kLora},
                                                    {"dora", PeftMethod::kDora}};
  return kNames;
}

std::span<const EnumName<Fsdp2Checkpoint>> EnumNames(Fsdp2Checkpoint) {
  static constexpr EnumName<Fsdp2Checkpoint> kNames[] = {
      {"none", Fsdp2Checkpoint::kNone},
      {"selective_op", Fsdp2Checkpoint::kSelectiveOp},
      {"selective_layer", Fsdp2Checkpoint::kSelectiveLayer},
      {"full", Fsdp2Checkpoint::kFull}};
  return kNames;
}

std::span<const EnumName<Fsdp2PipelineSchedule>> EnumNames(Fsdp2PipelineSchedule) {
  static constexpr EnumName<Fsdp2PipelineSchedule> kNames[] = {
      {"1F1B", Fsdp2PipelineSchedule::k1F1B},
      {"GPipe", Fsdp2PipelineSchedule::kGPipe},
      {"Interleaved1F1B", Fsdp2PipelineSchedule::kInterleaved1F1B}};
  return kNames;
}

int DataParallelSize(const Job& job) {
  const auto& m = job.model;
  const int model_parallel =
      m.tensor_model_parallel_size * m.pipeline_model_parallel_size * m.context_parallel_size;
  if (model_parallel <= 0 || job.memtune.world_size <= 0) return 1;
  return job.memtune.world_size / model_parallel;
}

int ExpertTensorParallelSize(const Job& job) {
  return job.model.expert_tensor_parallel_size.value_or(job.model.tensor_model_parallel_size);
}

int ExpertDataParallelSize(const Job& job) {
  const auto& m = job.model;
  const int denom =
      m.pipeline_model_parallel_size * m.expert_model_parallel_size * ExpertTensorParallelSize(job);
  if (denom <= 0 || job.memtune.world_size <= 0) return 1;
  return job.memtune.world_size / denom;
}

std::int64_t NumMicrobatches(const Job& job) {
  const std::int64_t per_step = job.train.micro_batch_size * DataParallelSize(job);
  if (per_step <= 0) return 1;
  return job.train.global_batch_size / per_step;
}

std::int64_t PaddedVocabSize(const Job& job) {
  const auto& m = job.model;
  if (!m.should_pad_vocab) return m.vocab_size;
  const std::int64_t multiple = m.make_vocab_size_divisible_by * m.tensor_model_parallel_size;
  if (multiple <= 0) return m.vocab_size;
  return (m.vocab_size + multiple - 1) / multiple * multiple;
}

}  // namespace memtune::model
