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
