// The classification of inputs memtune does not model. Flags: NVIDIA/Megatron-LM @ d98e8a64
// megatron/training/arguments.py; fields: NVIDIA-NeMo/Megatron-Bridge @ 067f987d
// training/config.py and Megatron-Core's TransformerConfig / DDP config.
#include "memtune/model/ignored_fields.h"

namespace memtune::model {
namespace {

constexpr IgnoredInput kInputs[] = {
    // Megatron-LM flags that change memory.
    {"--delay-wgrad-compute", true,
     "keeps each layer's wgrad inputs until the delayed weight-gradient GEMM (MCore "
     "delay_wgrad_compute, with overlap_moe_expert_parallel_comm)"},
    {"--empty-unused-memory-level", true,
     "torch.cuda.empty_cache() after the forward-backward (1) and the optimizer step (2): "
     "lowers reserved memory between steps (training.py train_step)"},
    {"--enable-cuda-graph", true,
     "the older local CUDA-graph switch: graph pools add reserved memory (use "
     "--cuda-graph-impl, which memtune reads)"},
    {"--external-cuda-graph", true,
     "the older TE CUDA-graph switch: graph pools add reserved memory (use --cuda-graph-impl)"},
    {"--heterogeneous-layers-config-path", true,
     "per-layer architectures (Nemotron-NAS): layers differ from the uniform stack memtune "
     "counts"},
    {"--hybrid-override-pattern", true,
     "a Mamba / attention hybrid stack: memtune models transformer layers only"},
    {"--inference-*", true,
     "RL / inference buffers (KV cache, dynamic-batching memory) allocated next to training"},
    {"--megatron-fsdp-grad-comm-dtype", true,
     "the dtype of Megatron-FSDP's gradient communication buffer"},
    {"--megatron-fsdp-main-grads-dtype", true, "the dtype of Megatron-FSDP's main gradient buffer"},
    {"--moe-layer-recompute", true,
     "recomputes each MoE layer in backward (its activations are not kept)"},
    {"--moe-pad-expert-input-to-capacity", true,
     "pads every expert's input to the capacity: expert activations sized by the capacity "
     "factor, not the routed tokens"},
    {"--moe-router-dtype", true, "the router's logits and probabilities in fp32 / fp64"},
    {"--record-memory-history", true,
     "the allocator records a trace: host memory only, but snapshots of long runs grow"},
    {"--tp-comm-overlap-cfg", true,
     "a userbuffers config: ring-exchange reduce-scatter buffers change TE's userbuffers"},
    {"--use-torch-fsdp2", true,
     "PyTorch FSDP2 sharding inside Megatron-LM: use memtune.framework: fsdp2"},
    // Megatron-LM flags without an effect on memory.
    {"--adam-beta1", false, "optimizer hyper-parameter"},
    {"--adam-beta2", false, "optimizer hyper-parameter"},
    {"--adam-eps", false, "optimizer hyper-parameter"},
    {"--async-save", false, "checkpointing (host memory)"},
    {"--ckpt-format", false, "checkpointing"},
    {"--clip-grad", false, "optimizer hyper-parameter (the norm is a scalar)"},
    {"--data-path", false, "data"},
    {"--distributed-backend", false, "process groups are NCCL either way"},
    {"--distributed-timeout-minutes", false, "timeouts"},
    {"--eval-interval", false, "evaluation schedule"},
    {"--eval-iters", false, "evaluation schedule (no backward: below the training peak)"},
    {"--exit-duration-in-mins", false, "run control"},
    {"--init-method-std", false, "initialization"},
    {"--load", false, "checkpointing"},
    {"--log-interval", false, "logging"},
    {"--log-throughput", false, "logging"},
    {"--lr", false, "optimizer hyper-parameter"},
    {"--lr-decay-style", false, "scheduler"},
    {"--lr-warmup-iters", false, "scheduler"},
    {"--manual-gc", false, "Python garbage collection (host memory)"},
    {"--min-lr", false, "scheduler"},
    {"--mock-data", false, "data"},
    {"--norm-epsilon", false, "numerics"},
    {"--num-workers", false, "data loader workers (host memory)"},
    {"--rotary-base", false, "RoPE frequencies"},
    {"--save", false, "checkpointing"},
    {"--save-interval", false, "checkpointing"},
    {"--seed", false, "randomness"},
    {"--split", false, "data"},
    {"--tensorboard-dir", false, "logging"},
    {"--train-iters", false, "run length"},
    {"--train-samples", false, "run length"},
    {"--use-mcore-models", false, "memtune models Megatron-Core models"},
    {"--wandb-project", false, "logging"},
    {"--weight-decay", false, "optimizer hyper-parameter"},
    // Bridge fields that change memory.
    {"model.delay_wgrad_compute", true,
     "keeps each layer's wgrad inputs until the delayed weight-gradient GEMM"},
    {"model.enable_cuda_graph", true, "the older local CUDA-graph switch: graph pools"},
    {"model.external_cuda_graph", true, "the older TE CUDA-graph switch: graph pools"},
    {"model.hybrid_override_pattern", true,
     "a Mamba / attention hybrid stack: memtune models transformer layers only"},
    {"model.moe_layer_recompute", true, "recomputes each MoE layer in backward"},
    {"model.moe_pad_expert_input_to_capacity", true,
     "expert activations sized by the capacity factor"},
    {"model.moe_router_dtype", true, "the router's logits and probabilities in fp32 / fp64"},
};

bool Matches(const IgnoredInput& entry, std::string_view name) {
  const std::string_view pattern = entry.name;
  if (!pattern.empty() && pattern.back() == '*') {
    return name.substr(0, pattern.size() - 1) == pattern.substr(0, pattern.size() - 1);
  }
  return name == pattern;
}

}  // namespace

std::span<const IgnoredInput> IgnoredInputs() { return kInputs; }

const IgnoredInput* FindIgnoredInput(std::string_view name) {
  if (name.rfind("--", 0) == 0) name = name.substr(0, name.find('='));
  for (const IgnoredInput& entry : kInputs) {
    if (Matches(entry, name)) return &entry;
  }
  return nullptr;
}

std::string IgnoredInputsMarkdown() {
  std::string out = "| input | changes memory | effect |\n|---|---|---|\n";
  for (const IgnoredInput& entry : kInputs) {
    out += std::string("| `") + entry.name + "` | " + (entry.memory_relevant ? "yes" : "no") +
           " | " + entry.effect + " |\n";
  }
  return out;
}

}  // namespace memtune::model
