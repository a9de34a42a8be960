// Layout rules: sizes, world size = TP*PP*CP*DP, batch divisibility, sequence parallelism,
// context-parallel sequence length.
#include "model/checks_internal.h"

namespace memtune::model::checks {
namespace {

Violations PositiveSizes(const Job& job) {
  const auto& m = job.model;
  Violations out;
  auto need = [&](const char* path, std::int64_t value, std::int64_t min) {
    if (value >= min) return;
    out.push_back(One(path, Str(value),
                      std::string(path) + " = " + Str(value) + " must be >= " + Str(min),
                      std::string("set ") + path + " to a value >= " + Str(min)));
  };
  need("model.tensor_model_parallel_size", m.tensor_model_parallel_size, 1);
  need("model.pipeline_model_parallel_size", m.pipeline_model_parallel_size, 1);
  need("model.context_parallel_size", m.context_parallel_size, 1);
  need("model.expert_model_parallel_size", m.expert_model_parallel_size, 1);
  if (m.expert_tensor_parallel_size) {
    need("model.expert_tensor_parallel_size", *m.expert_tensor_parallel_size, 1);
  }
  if (m.virtual_pipeline_model_parallel_size) {
    need("model.virtual_pipeline_model_parallel_size", *m.virtual_pipeline_model_parallel_size, 1);
  }
  need("model.num_layers", m.num_layers, 1);
  need("model.hidden_size", m.hidden_size, 1);
  need("model.num_attention_heads", m.num_attention_heads, 1);
  need("model.seq_length", m.seq_length, 1);
  if (m.should_pad_vocab) {
    need("model.make_vocab_size_divisible_by", m.make_vocab_size_divisible_by, 1);
  }
  need("train.micro_batch_size", job.train.micro_batch_size, 1);
  need("train.global_batch_size", job.train.global_batch_size, 1);
  need("memtune.world_size", job.memtune.world_size, 0);
  return out;
}

// Bridge ConfigContainer.get_data_parallel_size; MCore parallel_state.initialize_model_parallel.
Violations WorldSize(const Job& job) {
  if (!SizesValid(job) || job.memtune.world_size == 0) return {};
  const auto& m = job.model;
  const std::int64_t model = static_cast<std::int64_t>(m.tensor_model_parallel_size) *
                             m.pipeline_model_parallel_size * m.context_parallel_size;
  const std::int64_t world = job.memtune.world_size;
  if (world % model == 0) return {};
  const std::int64_t lower = world / model * model;
  return {Violation{{{"memtune.world_size", Str(world)},
                     {"model.tensor_model_parallel_size", Str(m.tensor_model_parallel_size)},
                     {"model.pipeline_model_parallel_size", Str(m.pipeline_model_parallel_size)},
                     {"model.context_parallel_size", Str(m.context_parallel_size)}},
                    "world size (" + Str(world) +
                        ") is not divisible by TP*PP*CP = " + Str(m.tensor_model_parallel_size) +
                        "*" + Str(m.pipeline_model_parallel_size) + "*" +
                        Str(m.context_parallel_size) + " = " + Str(model),
                    "set memtune.world_size to a multiple of " + Str(model) + " (" +
                        (lower > 0 ? Str(lower) + " or " : "") + Str(lower + model) +
                        "), or change TP, PP or CP so that their product divides " + Str(world)}};
}

// MCore num_microbatches_calculator.py, ConstantNumMicroBatchesCalculator.
Violations GlobalBatch(const Job& job) {
  if (!SizesValid(job)) return {};
  const std::int64_t world = EffectiveWorldSize(job);
  const auto& m = job.model;
  const std::int64_t model = static_cast<std::int64_t>(m.tensor_model_parallel_size) *
                             m.pipeline_model_parallel_size * m.context_parallel_size;
  if (world % model != 0) return {};  // layout.world-size reports it
  const std::int64_t dp = world / model;
  const std::int64_t mbs = job.train.micro_batch_size;
  const std::int64_t gbs = job.train.global_batch_size;
  const std::int64_t step = mbs * dp;
  if (gbs % step == 0) return {};
  const std::int64_t lower = gbs / step * step;
  return {Violation{
      {{"train.global_batch_size", Str(gbs)},
       {"train.micro_batch_size", Str(mbs)},
       {"memtune.world_size", Str(world)}},
      "global batch size (" + Str(gbs) + ") is not divisible by micro batch size (" + Str(mbs) +
          ") times data parallel size (" + Str(dp) + ")",
      "set train.global_batch_size to a multiple of micro_batch_size*data_parallel_size = " +
          Str(step) + " (" + (lower > 0 ? Str(lower) + " or " : "") + Str(lower + step) + ")"}};
}

Violations SequenceParallelNeedsTp(const Job& job) {
  const auto& m = job.model;
  if (!m.sequence_parallel || m.tensor_model_parallel_size != 1) return {};
  return {
      Violation{{{"model.sequence_parallel", "true"}, {"model.tensor_model_parallel_size", "1"}},
                "Cannot use sequence parallelism without tensor parallelism (Megatron-LM's "
                "arguments.py instead turns sequence_parallel off with a warning)",
                "set sequence_parallel: false, or tensor_model_parallel_size > 1"}};
}

Violations ExpertTensorNeedsSp(const Job& job) {
  const auto& m = job.model;
  if (m.expert_model_parallel_size <= 1 || m.tensor_model_parallel_size <= 1 ||
      m.sequence_parallel) {
    return {};
  }
  return {Violation{{{"model.expert_model_parallel_size", Str(m.expert_model_parallel_size)},
                     {"model.tensor_model_parallel_size", Str(m.tensor_model_parallel_size)},
                     {"model.sequence_parallel", "false"}},
                    "When using expert parallelism and tensor parallelism for training, "
                    "sequence parallelism must be used",
                    "set sequence_parallel: true"}};
}

Violations TpCommOverlapNeedsSp(const Job& job) {
  const auto& m = job.model;
  if (!m.tp_comm_overlap || m.sequence_parallel) return {};
  return {Violation{{{"model.tp_comm_overlap", "true"}, {"model.sequence_parallel", "false"}},
                    "Tensor parallel communication/GEMM overlap can happen only when sequence "
                    "parallelism is enabled",
                    "set sequence_parallel: true, or tp_comm_overlap: false"}};
}

// Bridge ConfigContainer.validate.
Violations ContextParallelSeqLength(const Job& job) {
  const auto& m = job.model;
  if (m.context_parallel_size <= 1 || m.seq_length <= 0) return {};
  const std::int64_t multiple = 2 * static_cast<std::int64_t>(m.context_parallel_size);
  if (m.seq_length % multiple == 0) return {};
  return {Violation{
      {{"model.seq_length", Str(m.seq_length)},
       {"model.context_parallel_size", Str(m.context_parallel_size)}},
      "Sequence length must be divisible by 2 * context parallel size if context "
      "parallel is used: " +
          Str(m.seq_length) + " % " + Str(multiple) + " = " + Str(m.seq_length % multiple),
      "set seq_length to a multiple of " + Str(multiple) + ", or change context_parallel_size"}};
}

// Bridge ConfigContainer.validate asserts model.seq_length == dataset.seq_length; dumps of
// runs that trained disagree, so memtune sizes the tensors by the dataset's (the batches).
Violations SeqLengthMismatch(const Job& job) {
  const auto& m = job.model;
  if (m.written_model_seq_length == 0) return {};
  return {Violation{{{"model.seq_length", Str(m.written_model_seq_length)},
                     {"dataset.seq_length", Str(m.seq_length)}},
                    "dataset.seq_length = " + Str(m.seq_length) +
                        " does not match "
                        "model.seq_length = " +
                        Str(m.written_model_seq_length) +
                        " (Bridge's ConfigContainer.validate asserts they agree): memtune "
                        "used the dataset's " +
                        Str(m.seq_length) + ", the length of the real batches",
                    "set model.seq_length: " + Str(m.seq_length) +
                        " (or drop it), or dataset.seq_length to the length the run trains "
                        "with"}};
}

constexpr Rule kRules[] = {
    {{"layout.positive-sizes", Severity::kError, RuleScope::kAll,
      "parallel sizes, batch sizes, layer/head counts and seq_length are >= 1",
      "set the field to a positive value", "Megatron-LM arguments.py"},
     PositiveSizes},
    {{"layout.world-size", Severity::kError, RuleScope::kAll,
      "world_size % (TP*PP*CP) == 0 (data parallel size is an integer)",
      "change world_size or TP/PP/CP", "Bridge ConfigContainer.get_data_parallel_size"},
     WorldSize},
    {{"layout.global-batch", Severity::kError, RuleScope::kAll,
      "global_batch_size % (micro_batch_size * DP) == 0",
      "set global_batch_size to a multiple of MBS*DP", "MCore num_microbatches_calculator"},
     GlobalBatch},
    {{"layout.sp-needs-tp", Severity::kError, RuleScope::kMegatron,
      "sequence_parallel requires tensor_model_parallel_size > 1",
      "sequence_parallel: false, or TP > 1", kMcoreParallel},
     SequenceParallelNeedsTp},
    {{"layout.ep-tp-needs-sp", Severity::kWarning, RuleScope::kMegatron,
      "EP > 1 with TP > 1 should use sequence_parallel", "sequence_parallel: true", kMcoreParallel},
     ExpertTensorNeedsSp},
    {{"layout.tp-comm-overlap-needs-sp", Severity::kError, RuleScope::kMegatron,
      "tp_comm_overlap requires sequence_parallel", "sequence_parallel: true", kMlmArgs},
     TpCommOverlapNeedsSp},
    {{"layout.cp-seq-length", Severity::kError, RuleScope::kMegatron,
      "CP > 1 requires seq_length % (2*CP) == 0", "change seq_length or context_parallel_size",
      kBridge},
     ContextParallelSeqLength},
    {{"layout.seq-length-mismatch", Severity::kWarning, RuleScope::kMegatron,
      "model.seq_length == dataset.seq_length (memtune uses the dataset's)",
      "give one sequence length", kBridge},
     SeqLengthMismatch},
};

}  // namespace

std::span<const Rule> LayoutRules() { return kRules; }

}  // namespace memtune::model::checks
