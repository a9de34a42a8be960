"""Megatron's contiguous param/grad buffer layout and the distributed-optimizer shard.

Pure Python, so the sizes can be tested and used for sizing without torch. Sources
(facts, not code): Megatron-LM @ d98e8a64 megatron/core/distributed/
param_and_grad_buffer.py (_compute_default_per_buffer_param_layout),
megatron/core/optimizer/distrib_optimizer.py (_compute_per_buffer_param_layout),
megatron/core/optimizer/param_layout.py (pad_param_start: 64 elements; pad_bucket_end:
lcm(dp, 128)), megatron/core/distributed/distributed_data_parallel.py (bucket_size =
max(40M, 1M * dp) with overlap_grad_reduce, None without, None on pipeline ranks > 0).
"""
import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

PARAM_START_ALIGN_ELEMS = 64   # pad_param_start
BUCKET_END_ALIGN_ELEMS = 128   # pad_bucket_end: lcm(dp, 128)
DEFAULT_BUCKET_ELEMS = 40_000_000
BUCKET_ELEMS_PER_DP_RANK = 1_000_000


def _pad(value: int, divisor: int) -> int:
    return int(math.ceil(value / divisor) * divisor)


def default_bucket_size(dp: int, overlap_grad_reduce: bool, pp_rank: int) -> Optional[int]:
    """DDP's bucket size in elements, or None for a single bucket."""
    if not overlap_grad_reduce or pp_rank > 0:
        return None
    return max(DEFAULT_BUCKET_ELEMS, BUCKET_ELEMS_PER_DP_RANK * dp)


@dataclass
class BufferLayout:
    """Where each parameter lives in the flat buffer (indices follow the input order)."""
    param_ranges: List[Tuple[int, int]]   # [start, end) per parameter
    buckets: List[Tuple[int, int]]        # [start, end) per bucket, padded
    numel: int                            # buffer elements, padding included


def buffer_layout(numels: List[int], dist_opt: bool, dp: int,
                  bucket_size: Optional[int]) -> BufferLayout:
    """Lays parameters out in reverse order (backward order), in buckets of about
    bucket_size elements. With the distributed optimizer each parameter starts on a
    64-element boundary and each bucket ends on a multiple of lcm(dp, 128)."""
    ranges: List[Optional[Tuple[int, int]]] = [None] * len(numels)
    buckets = []
    bucket_start, start, open_bucket = 0, 0, False
    end_divisor = math.lcm(dp, BUCKET_END_ALIGN_ELEMS) if dist_opt else 1
    for index in reversed(range(len(numels))):
        if dist_opt:
            start = _pad(start, PARAM_START_ALIGN_ELEMS)
        end = start + numels[index]
        ranges[index] = (start, end)
        open_bucket = True
        if bucket_size is not None and end - bucket_start >= bucket_size:
            bucket_end = _pad(end, end_divisor)
            buckets.append((bucket_start, bucket_end))
            bucket_start, start, open_bucket = bucket_end, bucket_end, False
        else:
            start = end
    if open_bucket:
        buckets.append((bucket_start, _pad(start, end_divisor)))
    return BufferLayout(param_ranges=ranges, buckets=buckets, numel=buckets[-1][1])


def shard_pieces(layout: BufferLayout, dp: int, dp_rank: int) -> List[Tuple[int, int, int]]:
    """The pieces of parameters the distributed optimizer gives dp_rank: each bucket is cut
    into dp equal shards; returns (param index, start, end) in buffer coordinates."""
    pieces = []
    for bucket_start, bucket_end in layout.buckets:
        shard = (bucket_end - bucket_start) // dp
        lo, hi = bucket_start + dp_rank * shard, bucket_start + (dp_rank + 1) * shard
        for index, (start, end) in enumerate(layout.param_ranges):
            a, b = max(start, lo), min(end, hi)
            if a < b:
                pieces.append((index, a, b))
    return pieces
