// The playbook's fixes for each cause, in its order, with their throughput cost
// (../seed memory-tuning.md: Quick Decision, Parallelism resizing, Failure Diagnosis).
#include <vector>

#include "diagnose/findings.h"
#include "memtune/alloc/oom_message.h"

namespace memtune::diagnose {
namespace {

struct FixRow {
  const char* id;
  const char* text;
  const char* cost;
};

constexpr FixRow kExpandable = {
    "allocator.expandable-segments",
    "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments grow in place, so freed "
    "memory can serve any later size)",
    "none"};
constexpr FixRow kGcThreshold = {
    "allocator.garbage-collection",
    "where expandable segments are not available: max_split_size_mb:512 keeps large cached "
    "blocks unsplit, and torch.cuda.empty_cache() between phases returns unused segments",
    "none to small"};
constexpr FixRow kLoraRegather = {
    "peft.lora-sp-regather",
    "LoRA with sequence parallelism: LoRA(sequence_parallel_input_regather=True) keeps only the "
    "sequence-local shard of the gathered LoRA-A input",
    "some (an extra all-gather in backward, overlapped)"};
constexpr FixRow kSelectiveRecompute = {
    "recompute.selective-core-attn",
    "selective activation recompute: recompute_modules=[core_attn]", "small"};
constexpr FixRow kMlpRecompute = {"recompute.mlp",
                                  "add mlp to recompute_modules (saves ~3 GB on "
                                  "Llama3 70B)",
                                  "~16%"};
constexpr FixRow kMoreMicroBatches = {
    "train.smaller-micro-batch",
    "lower the micro-batch size or the sequence length per GPU "
    "(context parallelism) and keep the global batch with more accumulation steps",
    "some (smaller GEMMs)"};
constexpr FixRow kDistOptimizer = {
    "parallel.distributed-optimizer",
    "shard the optimizer state across data-parallel ranks: use_distributed_optimizer=True",
    "~1-2%"};
constexpr FixRow kFsdp = {"parallel.fsdp",
                          "shard parameters, gradients and optimizer state "
                          "(Megatron-FSDP / FSDP2)",
                          "varies"};
constexpr FixRow kMorePp = {"parallel.increase-pp",
                            "increase pipeline parallelism, keeping DP "
                            "(fewer layers per stage)",
                            "~6% if DP halves"};
constexpr FixRow kCpuOffload = {"offload.optimizer-cpu",
                                "offload the optimizer state to the CPU "
                                "(only with PP = 1)",
                                "large"};
constexpr FixRow kMoreTp = {"parallel.increase-tp", "increase tensor parallelism: last resort",
                            "severe (-28% on Llama3 70B)"};
constexpr FixRow kOtherProcess = {
    "gpu.free-other-processes",
    "free the GPU: stop the other processes nvidia-smi lists on it, or give a colocated engine "
    "less (vLLM gpu_memory_utilization, sleep level 2)",
    "none"};
constexpr FixRow kNonPytorch = {
    "nccl.reduce-buffers",
    "shrink memory outside PyTorch: fewer NCCL communicators and channels (NCCL_NVLS_ENABLE=0, "
    "NCCL_MAX_NCHANNELS), no userbuffers (--use-nccl-ub, tp-comm-overlap) unless needed; leave "
    "room for NCCL and cuBLAS by lowering PyTorch's peak",
    "small"};
constexpr FixRow kLeak = {
    "code.release-tensors",
    "stop keeping tensors across iterations: accumulate loss.item() or loss.detach(), do not "
    "store outputs or graphs in lists",
    "none"};
constexpr FixRow kImbalance = {
    "parallel.balance-ranks",
    "balance the heavy rank: call torch.cuda.set_device(local_rank) before any CUDA work and "
    "torch.load(..., map_location) so no rank uses GPU 0; move layers off a heavy pipeline "
    "stage (decoder_first/last_pipeline_num_layers, account_for_embedding/loss_in_pipeline_split)",
    "none"};
constexpr FixRow kCheckpoint = {
    "checkpoint.load-to-cpu",
    "load checkpoints to the CPU (torch.load(map_location=\"cpu\")), free the loaded state "
    "before training, and call torch.cuda.empty_cache() after loading; for async saves keep "
    "fewer tensors staged on the GPU",
    "none"};
constexpr FixRow kEval = {
    "eval.free-training-memory",
    "run evaluation and generation under torch.no_grad()/inference_mode with a smaller batch; "
    "release training buffers (empty_cache, offload the optimizer of a colocated trainer) first",
    "none"};

std::vector<FixRow> Rows(Cause cause, bool lora_sp) {
  switch (cause) {
    case Cause::kFragmentation:
      return {kExpandable, kGcThreshold};
    case Cause::kCapacityActivations: {
      std::vector<FixRow> rows = {kExpandable};
      if (lora_sp) rows.push_back(kLoraRegather);
      rows.insert(rows.end(),
                  {kSelectiveRecompute, kMoreMicroBatches, kMlpRecompute, kMorePp, kMoreTp});
      return rows;
    }
    case Cause::kCapacityModelState:
      return {kExpandable, kDistOptimizer, kFsdp, kMorePp, kCpuOffload, kMoreTp};
    case Cause::kOtherProcess:
      return {kOtherProcess};
    case Cause::kNonPytorch:
      return {kNonPytorch, kExpandable};
    case Cause::kLeak:
      return {kLeak};
    case Cause::kImbalance:
      return {kImbalance, kExpandable};
    case Cause::kCheckpointLoad:
      return {kCheckpoint, kExpandable};
    case Cause::kEvalOrGeneration:
      return {kEval, kExpandable};
    case Cause::kConfigConflict:
    case Cause::kUnknown:
      return {};
  }
  return {};
}

// A fix the job already has is no fix.
bool AlreadyInJob(const FixRow& row, const model::Job* job) {
  if (!job) return false;
  const std::string_view id = row.id;
  if (id == kDistOptimizer.id) return job->optimizer.use_distributed_optimizer;
  if (id == kExpandable.id) {
    auto it = job->memtune.env.find("PYTORCH_CUDA_ALLOC_CONF");
    return it != job->memtune.env.end() &&
           it->second.find("expandable_segments:True") != std::string::npos;
  }
  return false;
}

// The snapshot's replay under expandable_segments:True, in the Fix::predicted form.
std::string SnapshotPrediction(const SnapshotFinding& s) {
  return "replayed: peak reserved " + alloc::FormatSize(s.expandable_peak_reserved_bytes) +
         "; fits";
}

bool LoraWithSp(const model::Job* job) { return job && job->peft && job->model.sequence_parallel; }

}  // namespace

std::vector<Fix> FixesFor(const Decision& d, const Findings& f, const model::Job* job) {
  std::vector<Fix> out;
  if (d.cause == Cause::kConfigConflict) {
    for (const auto& e : f.config_errors) out.push_back({e.item.id, e.item.fix, "none", "", {}});
    return out;
  }
  const bool expandable_set = !f.expandable_set.empty();
  for (const FixRow& row : Rows(d.cause, LoraWithSp(job))) {
    // Already set: the playbook's "OOM with expandable_segments already set" row.
    if (expandable_set && std::string_view(row.id) == kExpandable.id) continue;
    if (AlreadyInJob(row, job)) continue;
    // A replay showed it does not avoid the OOM.
    const bool is_expandable = std::string_view(row.id) == kExpandable.id;
    if (is_expandable && !f.snapshots.empty() && f.snapshots.front().expandable_oom) continue;
    out.push_back({row.id, row.text, row.cost, "", {}});
    if (is_expandable && !f.snapshots.empty()) {
      out.back().predicted = SnapshotPrediction(f.snapshots.front());
    }
  }
  return out;
}

}  // namespace memtune::diagnose
