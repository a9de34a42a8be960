"""Writes each workload as a memtune job document and its measurements as validation cases
(the formats of docs/job-format.md sections 1 and 2)."""
from typing import Dict, List, Optional

import workloads

METRICS = ("max_allocated", "max_reserved", "device_used")
ALLOC_CONF = {"native": None, "expandable": "expandable_segments:True"}

# Differences from a Megatron rank that change memory, stated in every case.
COMMON_APPROX = (
    "APPROX: one rank emulated in one process: no NCCL communicators, so device_used lacks "
    "NCCL's buffers; TP/SP collectives are local ops that allocate the same outputs "
    "(gather = repeat, reduce-scatter = sum over the TP copies)",
    "APPROX: no rotary embedding and no attention-mask tensor; core attention keeps q, k, v, "
    "its output and an fp32 log-sum-exp (as flash attention) and recomputes inside backward",
    "APPROX: weight gradients pass through a bf16 param.grad that a hook adds into main_grad "
    "(gradient_accumulation_fusion off); with fusion the wgrad GEMM writes main_grad directly",
    "APPROX: Adam is torch.optim.Adam (fused on CUDA) instead of TE/Apex FusedAdam: same "
    "fp32 state, plus one small step tensor per master param",
)


def _recompute_fields(wl: workloads.Workload) -> Dict:
    if wl.recompute is None:
        return {"recompute_granularity": None}
    fields = {"recompute_granularity": wl.recompute}
    if wl.recompute == "selective":
        fields["recompute_modules"] = list(wl.recompute_modules)
    else:
        fields["recompute_method"] = wl.recompute_method
        fields["recompute_num_layers"] = wl.recompute_num_layers
    return fields


def job_document(wl: workloads.Workload, mode: str, gpu_memory_bytes: int) -> Dict:
    """The job memtune predicts for this workload and allocator mode."""
    model = {
        "num_layers": wl.layers_per_chunk * wl.chunks * wl.pp,
        "hidden_size": wl.hidden, "ffn_hidden_size": wl.ffn,
        "num_attention_heads": wl.heads, "num_query_groups": wl.groups,
        "kv_channels": wl.head_dim, "vocab_size": wl.vocab,
        "make_vocab_size_divisible_by": 128, "should_pad_vocab": False,
        "share_embeddings_and_output_weights": False, "gated_linear_unit": True,
        "activation_func": "silu", "normalization": "RMSNorm", "add_bias_linear": False,
        "add_qkv_bias": False, "qk_layernorm": False, "hidden_dropout": 0.0,
        "attention_dropout": 0.0, "position_embedding_type": "none",
        "tensor_model_parallel_size": wl.tp, "pipeline_model_parallel_size": wl.pp,
        "virtual_pipeline_model_parallel_size": wl.vpp, "context_parallel_size": 1,
        "sequence_parallel": wl.sp, "seq_length": wl.max_seq,
        "cross_entropy_loss_fusion": False, "deallocate_pipeline_outputs": True,
    }
    model.update(_recompute_fields(wl))
    grad_fp32 = wl.grad_fp32
    memtune = {"framework": "megatron", "world_size": wl.tp * wl.pp * wl.dp,
               "gpu_memory_bytes": gpu_memory_bytes, "gpus_per_node": 8}
    if ALLOC_CONF[mode]:
        memtune["env"] = {"PYTORCH_CUDA_ALLOC_CONF": ALLOC_CONF[mode]}
    return {
        "model": model,
        "train": {"micro_batch_size": wl.mbs,
                  "global_batch_size": wl.mbs * wl.microbatches * wl.dp},
        "optimizer": {"optimizer": "adam", "use_distributed_optimizer": wl.dist_opt},
        "ddp": {"grad_reduce_in_fp32": grad_fp32, "use_distributed_optimizer": wl.dist_opt,
                "overlap_grad_reduce": wl.overlap_grad_reduce},
        "mixed_precision": {"bf16": True, "params_dtype": "bf16", "pipeline_dtype": "bf16",
                            "autocast_enabled": False, "grad_reduce_in_fp32": grad_fp32},
        "peft": None,
        "dataset": {"seq_length": wl.max_seq},
        "memtune": memtune,
    }


def _rank(wl: workloads.Workload) -> str:
    return {"only": "max", "first": "rank0", "last": "last"}[wl.stage]


def _metric_line(metric: str, result: Dict) -> str:
    what = {"max_allocated": "torch.cuda.max_memory_allocated()",
            "max_reserved": "torch.cuda.max_memory_reserved()",
            "device_used": f"device memory in use ({result.get('device_used_source')})"}
    return (f"measured value: {result[metric]} bytes = {what[metric]} after "
            f"{len(result['iterations'])} iterations (peak since process start)")


def _assumptions(wl, mode, metric, result) -> List[str]:
    lines = [_metric_line(metric, result) if not result["dry"] else
             f"DRY RUN on the CPU with tiny shapes: {result[metric]} bytes is the CPU "
             "allocator's peak from the profiler, not a GPU measurement"]
    lines.append(f"workload {wl.name}: {wl.summary}; {wl.layers_per_chunk} layers per model "
                 f"chunk on this rank, {wl.microbatches} micro-batches per step")
    lines.append(f"allocator mode {mode}: PYTORCH_CUDA_ALLOC_CONF="
                 f"{ALLOC_CONF[mode] or '(unset)'}")
    if wl.dist_opt:
        lines.append(f"distributed optimizer: the rank holds DP shard 0 of {wl.dp}")
    steady = result.get("steady")
    if steady is not None:
        lines.append(f"steady state: peak allocated {'did not change' if steady else 'still grew'}"
                     " over the last iteration")
    return lines + list(COMMON_APPROX) + list(wl.notes)


def cases(wl: workloads.Workload, mode: str, result: Dict, env: Dict,
          gpu_memory_bytes: int) -> List[Dict]:
    """One validation case per metric for a finished run (or one stopped by its time
    budget after at least two steps); none otherwise."""
    finished = result.get("status") == "ok" or (
        result.get("status") == "partial" and len(result.get("iterations", [])) >= 2)
    if not finished:
        return []
    job = job_document(wl, mode, gpu_memory_bytes)
    prefix = "calib-dry" if result["dry"] else "calib"
    source = (f"memtune calibration harness tools/calibrate, workload {wl.name}, "
              f"{env.get('device_name', 'cpu')}, PyTorch {env.get('torch')}")
    out = []
    for metric in METRICS:
        out.append({
            "id": f"{prefix}-{wl.name}-{mode}-{metric}",
            "source": source,
            "job": job,
            "measured": {"metric": metric, "bytes": int(result[metric]), "rank": _rank(wl)},
            "assumptions": _assumptions(wl, mode, metric, result),
            "quality": "low" if result["dry"] else "high",
        })
    return out


def approx_lines(wl: Optional[workloads.Workload] = None) -> List[str]:
    """Every APPROX line a workload's cases carry."""
    return list(COMMON_APPROX) + (list(wl.notes) if wl else [])
