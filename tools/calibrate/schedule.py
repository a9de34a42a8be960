"""Megatron pipeline schedules as an ordered list of forward/backward steps for one rank.

Pure Python (no torch), so the order and the in-flight counts can be tested on their own.
Sources: Megatron-LM megatron/core/pipeline_parallel/schedules.py @ d98e8a64
(get_pp_rank_microbatches, get_schedule_table, forward_backward_pipelining_with[out]_
interleaving, forward_backward_no_pipelining); docs/megatron.md section 4.
"""
from dataclasses import dataclass
from typing import List, Optional, Tuple


@dataclass(frozen=True)
class Step:
    """One schedule step: 'F' (forward) or 'B' (backward) of (micro-batch, model chunk)."""
    kind: str
    microbatch: int
    chunk: int


def num_warmup_microbatches(pp_size: int, pp_rank: int, num_microbatches: int,
                            num_chunks: int = 1, group_size: Optional[int] = None) -> int:
    """Warm-up forwards before the first backward (MCore get_pp_rank_microbatches).

    Non-interleaved: pp_size - pp_rank - 1. Interleaved (num_chunks > 1):
    2 * (pp_size - pp_rank - 1) + (num_chunks - 1) * group_size, group_size defaulting to
    pp_size (microbatch_group_size_per_vp_stage). Capped at num_microbatches * num_chunks.
    Without pipelining (pp_size == 1) there is no warm-up.
    """
    total = num_microbatches * num_chunks
    if pp_size == 1:
        return 0
    if num_chunks == 1:
        warmup = pp_size - pp_rank - 1
    else:
        group = pp_size if group_size is None else group_size
        warmup = 2 * (pp_size - pp_rank - 1) + (num_chunks - 1) * group
    return min(warmup, total)


def schedule_table(num_microbatches: int, num_chunks: int,
                   group_size: int) -> List[Tuple[int, int]]:
    """(micro-batch, chunk) of each virtual micro-batch, in forward order (MCore
    get_schedule_table): groups of group_size micro-batches go through every chunk in turn."""
    table = []
    for first in range(0, num_microbatches, group_size):
        last = min(first + group_size, num_microbatches)
        table.extend((mb, chunk) for chunk in range(num_chunks) for mb in range(first, last))
    return table


def rank_steps(pp_size: int, pp_rank: int, num_microbatches: int, num_chunks: int = 1,
               group_size: Optional[int] = None) -> List[Step]:
    """The forward/backward steps rank pp_rank runs in one training step, in order.

    Warm-up forwards, then steady 1F1B pairs (forward k + warmup, then backward k), then
    cool-down backwards. Backward k uses the same table entry with the chunk reversed
    (MCore get_model_chunk_id(forward=False)). pp_size == 1 is forward_backward_no_
    pipelining: F0 B0 F1 B1 ...
    """
    if num_chunks > 1 and pp_size == 1:
        raise ValueError("virtual pipeline stages need pipeline_model_parallel_size > 1")
    group = pp_size if group_size is None else group_size
    table = schedule_table(num_microbatches, num_chunks, group)
    total = len(table)
    warmup = num_warmup_microbatches(pp_size, pp_rank, num_microbatches, num_chunks, group)

    def forward(k):
        mb, chunk = table[k]
        return Step("F", mb, chunk)

    def backward(k):
        mb, chunk = table[k]
        return Step("B", mb, num_chunks - 1 - chunk)

    steps = [forward(k) for k in range(warmup)]
    for k in range(total - warmup):
        steps.append(forward(k + warmup))
        steps.append(backward(k))
    steps.extend(backward(k) for k in range(total - warmup, total))
    return steps


def peak_in_flight(steps: List[Step]) -> int:
    """Most (micro-batch, chunk) pairs whose forward ran and whose backward has not."""
    live, peak = 0, 0
    for step in steps:
        live += 1 if step.kind == "F" else -1
        peak = max(peak, live)
    return peak
