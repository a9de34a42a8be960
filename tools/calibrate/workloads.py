"""The calibration matrix: each workload is one Megatron rank (model shape, TP/SP, PP stage,
micro-batches in flight, recompute, distributed-optimizer shard), sized to a GPU.

Pure Python (no torch). `size_workload` picks the layers per model chunk so that the
harness's own byte count (`expected_bytes`, the tensors the workload allocates) fills a
share of the GPU; the dry mode shrinks every shape so the same code runs on a CPU.
"""
import dataclasses
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import layout as buffer_layout_mod
import schedule

BF16_BYTES, FP32_BYTES, INT64_BYTES = 2, 4, 8
ADAM_STATE_BYTES = 3 * FP32_BYTES   # fp32 master + exp_avg + exp_avg_sq per element
LLAMA3_VOCAB = 128256


@dataclass(frozen=True)
class Workload:
    """One rank of a Megatron GPT job. Shapes are the whole model's; per-rank shapes
    follow from tp. `layers_per_chunk` is filled in by size_workload."""
    name: str
    summary: str
    hidden: int = 4096
    ffn: int = 14336
    heads: int = 32
    groups: int = 8
    head_dim: int = 128
    vocab: int = LLAMA3_VOCAB
    seq: int = 4096
    mbs: int = 1
    microbatches: int = 2           # per step and data-parallel rank
    tp: int = 1
    sp: bool = False
    pp: int = 1
    vpp: Optional[int] = None
    stage: str = "only"             # only (pp == 1) | first | last
    dp: int = 1
    dist_opt: bool = False
    grad_fp32: bool = True          # grad_reduce_in_fp32: fp32 main_grad buffer, else bf16
    overlap_grad_reduce: bool = True
    recompute: Optional[str] = None  # None | selective | full
    recompute_modules: Tuple[str, ...] = ()
    recompute_method: Optional[str] = None   # uniform | block (full only)
    recompute_num_layers: Optional[int] = None
    seq_cycle: Tuple[int, ...] = ()  # per-micro-batch sequence lengths (fragmenting)
    fill: float = 0.6               # share of GPU memory the sizing aims at
    max_layers_per_chunk: int = 48
    snapshot: bool = False
    fragmenting: bool = False
    notes: Tuple[str, ...] = ()     # extra APPROX lines for the job's assumptions
    layers_per_chunk: int = 0

    @property
    def chunks(self) -> int:
        return self.vpp or 1

    @property
    def pp_rank(self) -> int:
        return self.pp - 1 if self.stage == "last" else 0

    @property
    def has_embedding(self) -> bool:
        return self.stage in ("only", "first")

    @property
    def has_output(self) -> bool:
        return self.stage in ("only", "last")

    @property
    def max_seq(self) -> int:
        return max(self.seq_cycle) if self.seq_cycle else self.seq

    def seq_of(self, iteration: int, microbatch: int) -> int:
        if not self.seq_cycle:
            return self.seq
        return self.seq_cycle[(iteration * self.microbatches + microbatch) % len(self.seq_cycle)]

    def validate(self) -> None:
        assert self.heads % self.groups == 0 and self.groups % self.tp == 0, self.name
        assert self.ffn % self.tp == 0 and self.vocab % self.tp == 0, self.name
        assert all(s % self.tp == 0 for s in (self.seq,) + self.seq_cycle), self.name
        assert (self.pp == 1) == (self.stage == "only"), self.name
        assert self.vpp is None or self.microbatches % self.pp == 0, self.name
        assert self.tp > 1 or not self.sp, self.name


def rank_param_numels(wl: Workload) -> List[Tuple[str, List[int]]]:
    """Parameter shapes one rank holds, chunk by chunk, in registration order."""
    h, d, t = wl.hidden, wl.head_dim, wl.tp
    a_t, g_t, f_t, v_t = wl.heads // t, wl.groups // t, wl.ffn // t, wl.vocab // t
    layer = [[h], [(a_t + 2 * g_t) * d, h], [h, a_t * d], [h], [2 * f_t, h], [h, f_t]]
    chunks = []
    for chunk in range(wl.chunks):
        shapes = []
        if wl.has_embedding and chunk == 0:
            shapes.append([v_t, h])
        shapes += layer * wl.layers_per_chunk
        if wl.has_output and chunk == wl.chunks - 1:
            shapes += [[h], [v_t, h]]
        chunks.append((f"chunk{chunk}", shapes))
    return chunks


def _numel(shape: List[int]) -> int:
    out = 1
    for dim in shape:
        out *= dim
    return out


def state_bytes(wl: Workload) -> Dict[str, int]:
    """Bytes of parameters, gradient buffer and optimizer state (one buffer per chunk,
    as MCore wraps each model chunk in its own DDP)."""
    params = grads = optim = 0
    grad_bytes = FP32_BYTES if wl.grad_fp32 else BF16_BYTES
    bucket = buffer_layout_mod.default_bucket_size(wl.dp, wl.overlap_grad_reduce, wl.pp_rank)
    for _, shapes in rank_param_numels(wl):
        numels = [_numel(s) for s in shapes]
        lay = buffer_layout_mod.buffer_layout(numels, wl.dist_opt, wl.dp, bucket)
        grads += grad_bytes * lay.numel
        if wl.dist_opt:
            params += BF16_BYTES * lay.numel
            pieces = buffer_layout_mod.shard_pieces(lay, wl.dp, 0)
            optim += ADAM_STATE_BYTES * sum(end - start for _, start, end in pieces)
        else:
            params += BF16_BYTES * sum(numels)
            optim += ADAM_STATE_BYTES * sum(numels)
    return {"params": params, "grads": grads, "optimizer": optim}


def layer_activation_bytes(wl: Workload, seq: int) -> int:
    """Bytes one layer keeps for backward per micro-batch without full recompute
    (megatron.md section 8.2, plus the fp32 rstd and log-sum-exp), under the workload's
    selective recompute modules."""
    h, d, t, b = wl.hidden, wl.head_dim, wl.tp, wl.mbs
    a_t, g_t, f_t = wl.heads // t, wl.groups // t, wl.ffn // t
    s_local = seq // t if wl.sp else seq
    norm_in = BF16_BYTES * h * s_local * b + FP32_BYTES * s_local * b
    attn = BF16_BYTES * seq * b * (2 * a_t * d + 2 * g_t * d)   # q, k, v
    attn += BF16_BYTES * seq * b * a_t * d                       # output = proj input
    if "core_attn" not in wl.recompute_modules:
        attn += FP32_BYTES * b * a_t * seq                       # log-sum-exp
    mlp = BF16_BYTES * seq * b * 3 * f_t                         # fc1 out + fc2 in
    if "mlp" in wl.recompute_modules:
        mlp = 0
    ln_out = 2 * BF16_BYTES * h * s_local * b                    # LN1 and LN2 outputs
    return 2 * norm_in + ln_out + attn + mlp


def checkpointed_layers(wl: Workload) -> List[Tuple[int, int]]:
    """Full recompute: the [first, last) layer groups of a chunk run under one checkpoint
    (uniform: groups of recompute_num_layers; block: the first recompute_num_layers layers
    one by one). Empty without full recompute (megatron/core/transformer/transformer_block.py
    _checkpointed_forward)."""
    if wl.recompute != "full":
        return []
    n, layers = wl.recompute_num_layers or 1, wl.layers_per_chunk
    if wl.recompute_method == "block":
        return [(i, i + 1) for i in range(min(n, layers))]
    return [(i, min(i + n, layers)) for i in range(0, layers, n)]


def chunk_activation_bytes(wl: Workload, seq: int) -> int:
    """Bytes one model chunk keeps for backward per micro-batch."""
    groups = checkpointed_layers(wl)
    covered = sum(last - first for first, last in groups)
    s_local = seq // wl.tp if wl.sp else seq
    group_inputs = len(groups) * BF16_BYTES * wl.hidden * s_local * wl.mbs
    return group_inputs + (wl.layers_per_chunk - covered) * layer_activation_bytes(wl, seq)


def expected_bytes(wl: Workload) -> Dict[str, int]:
    """The harness's own count of what the rank holds at its peak: model state, the
    activations of the most micro-batches in flight, and the largest transient."""
    out = state_bytes(wl)
    steps = schedule.rank_steps(wl.pp, wl.pp_rank, wl.microbatches, wl.chunks)
    in_flight = schedule.peak_in_flight(steps)
    seq, b = wl.max_seq, wl.mbs
    act = in_flight * chunk_activation_bytes(wl, seq)
    if wl.has_embedding:
        act += in_flight * 2 * INT64_BYTES * seq * b
    v_t, h = wl.vocab // wl.tp, wl.hidden
    logits = 0
    if wl.has_output:
        logits = (FP32_BYTES + BF16_BYTES) * seq * b * v_t   # fp32 softmax + bf16 logits
    full_layer = layer_activation_bytes(
        dataclasses.replace(wl, recompute=None, recompute_modules=()), seq)
    groups = checkpointed_layers(wl)
    replay = max((last - first for first, last in groups), default=0) * full_layer
    transient = max(logits, BF16_BYTES * v_t * h, 2 * full_layer) + replay
    out.update({"activations": act, "transient": transient, "in_flight": in_flight})
    out["total"] = sum(out[k] for k in ("params", "grads", "optimizer", "activations",
                                         "transient"))
    return out


def size_workload(wl: Workload, capacity_bytes: int) -> Workload:
    """Sets layers_per_chunk to the most layers whose expected total stays within
    wl.fill * capacity_bytes (at least 1, at most wl.max_layers_per_chunk)."""
    wl.validate()
    best = 1
    for layers in range(1, wl.max_layers_per_chunk + 1):
        trial = dataclasses.replace(wl, layers_per_chunk=layers)
        if expected_bytes(trial)["total"] > wl.fill * capacity_bytes:
            break
        best = layers
    return dataclasses.replace(wl, layers_per_chunk=best)


def dry_workload(wl: Workload) -> Workload:
    """The same workload with tiny shapes for a CPU run: same TP/PP/VPP/schedule/recompute,
    head dim 16, one layer per chunk (one recompute group; block recompute: the
    checkpointed layers plus one stored layer)."""
    groups = max(2, wl.tp)
    heads = groups * min(wl.heads // wl.groups, 4)
    hidden = heads * 16
    seq = 16 * wl.tp if wl.sp else 32
    cycle = tuple(max(wl.tp, round(s * seq / wl.seq / wl.tp) * wl.tp) for s in wl.seq_cycle)
    group = wl.recompute_num_layers or 1
    layers = group + 1 if wl.recompute_method == "block" else group
    return dataclasses.replace(
        wl, hidden=hidden, ffn=3 * hidden, heads=heads, groups=groups, head_dim=16,
        vocab=256 * wl.tp, seq=seq, seq_cycle=cycle, mbs=min(wl.mbs, 2),
        layers_per_chunk=layers, max_layers_per_chunk=layers)


def matrix() -> List[Workload]:
    """All workloads (see docs/calibrate.md for what each reproduces)."""
    from matrix import WORKLOADS
    return list(WORKLOADS)


def by_name(names: Optional[str]) -> List[Workload]:
    """Workloads named in a comma-separated list (all when names is None or empty).
    Raises KeyError naming the unknown workload."""
    all_wl = matrix()
    if not names:
        return all_wl
    known = {wl.name: wl for wl in all_wl}
    picked = []
    for name in names.split(","):
        if name not in known:
            raise KeyError(f"unknown workload '{name}'; known: {', '.join(known)}")
        picked.append(known[name])
    return picked
