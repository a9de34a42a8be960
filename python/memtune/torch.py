"""Allocator snapshots from PyTorch, ready for memtune.inspect / memtune.replay.

Imports without torch; the functions import it when called. A snapshot is the pickle
PyTorch writes (torch.cuda.memory._snapshot()): segments, blocks and, while history is
recorded, the allocator's event trace, which memtune replays.

    import memtune.torch
    with memtune.torch.record("snapshots"):        # history on; OOM observer attached
        train()                                     # an OOM still raises, after the dump
    memtune.inspect("snapshots/snapshot_rank-0.pickle")

Defaults: Python-only stacks (stacks="python": dumps with C++ stacks take minutes to
symbolize) and max_entries=100000 alloc/free events kept (a ring buffer; the value PyTorch's
"Understanding CUDA Memory Usage" page uses). File names: snapshot_rank-N.pickle at the end of
the block, snapshot_oom_rank-N.pickle when an out-of-memory error happens, N the
torch.distributed rank (else $RANK, else 0).

Which PyTorch calls exist depends on the release: 2.1+ has stacks/max_entries, the OOM
observer and _dump_snapshot; 2.0 records Python stacks only; 1.13 records without limits and
has no observer (the OOM dump then happens when the exception leaves the block). All of it
needs a CUDA build of torch and a GPU.
"""

from __future__ import annotations

import inspect as _inspect
import os
import pickle
from pathlib import Path
from typing import Any

DEFAULT_MAX_ENTRIES = 100_000
DEFAULT_STACKS = "python"


def _torch() -> Any:
    try:
        import torch  # noqa: PLC0415 (torch is optional)
    except ImportError as e:
        raise ImportError("memtune.torch needs PyTorch (apt install python3-torch)") from e
    return torch


def rank() -> int:
    """This process's rank: torch.distributed when initialised, else $RANK, else 0."""
    try:
        dist = _torch().distributed
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
    except ImportError:
        pass
    return int(os.environ.get("RANK", "0"))


def snapshot_path(out_dir: str | os.PathLike = ".", oom: bool = False) -> Path:
    """out_dir/snapshot_rank-N.pickle, or snapshot_oom_rank-N.pickle with oom=True."""
    return Path(out_dir) / f"snapshot_{'oom_' if oom else ''}rank-{rank()}.pickle"


def is_out_of_memory(error: BaseException) -> bool:
    """True for torch.cuda.OutOfMemoryError (2.0+) and 1.x's RuntimeError 'CUDA out of memory'."""
    return (type(error).__name__ == "OutOfMemoryError" or
            (isinstance(error, RuntimeError) and "CUDA out of memory" in str(error)))


def start_history(max_entries: int = DEFAULT_MAX_ENTRIES, stacks: str = DEFAULT_STACKS,
                  device: Any = None) -> None:
    """Starts recording allocator history (torch.cuda.memory._record_memory_history)."""
    record_history = _torch().cuda.memory._record_memory_history
    params = _inspect.signature(record_history).parameters
    if "stacks" in params:  # 2.1+
        record_history("all", context="all", stacks=stacks, max_entries=max_entries,
                       device=device)
    elif "trace_alloc_max_entries" in params:  # 2.0: Python stacks only
        record_history(True, trace_alloc_max_entries=max_entries,
                       trace_alloc_record_context=True, device=device)
    else:  # 1.13
        record_history(True, device=device)


def stop_history() -> None:
    """Stops recording allocator history."""
    record_history = _torch().cuda.memory._record_memory_history
    params = _inspect.signature(record_history).parameters
    record_history(None if "stacks" in params else False)


def dump(path: str | os.PathLike | None = None, out_dir: str | os.PathLike = ".") -> Path:
    """Writes the allocator snapshot (default out_dir/snapshot_rank-N.pickle); returns the path."""
    target = Path(path) if path is not None else snapshot_path(out_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    memory = _torch().cuda.memory
    if hasattr(memory, "_dump_snapshot"):
        memory._dump_snapshot(str(target))
    else:
        with open(target, "wb") as f:
            pickle.dump(memory._snapshot(), f)
    return target


def attach_oom_observer(out_dir: str | os.PathLike = ".") -> bool:
    """Dumps snapshot_oom_rank-N.pickle when the allocator runs out of memory (2.1+).

    The observer only writes the file: PyTorch raises the OutOfMemoryError after it returns.
    Returns False when this PyTorch has no observer hook.
    """
    attach = getattr(_torch()._C, "_cuda_attach_out_of_memory_observer", None)
    if attach is None:
        return False

    def observer(device: int, alloc: int, device_alloc: int, device_free: int) -> None:
        dump(snapshot_path(out_dir, oom=True))

    attach(observer)
    return True


class record:  # noqa: N801 (used as a function: `with memtune.torch.record():`)
    """Context manager: records allocator history, dumps per rank, dumps on OOM.

    out_dir: where the snapshots go; max_entries: events kept (ring buffer); stacks:
    "python" (default) or "all" (with C++ frames: slow dumps); dump_on_exit: write
    snapshot_rank-N.pickle when the block ends. An out-of-memory error is never swallowed:
    the OOM snapshot is written (by the observer, or here when there is none) and the
    exception propagates. .path / .oom_path are the files written (or None).

    Example:
        >>> with memtune.torch.record("snaps") as rec:
        ...     model(batch).sum().backward()
        >>> memtune.inspect(rec.path)
    """

    def __init__(self, out_dir: str | os.PathLike = ".", max_entries: int = DEFAULT_MAX_ENTRIES,
                 stacks: str = DEFAULT_STACKS, dump_on_exit: bool = True,
                 oom_observer: bool = True, device: Any = None):
        self.out_dir = Path(out_dir)
        self.max_entries = max_entries
        self.stacks = stacks
        self.dump_on_exit = dump_on_exit
        self.oom_observer = oom_observer
        self.device = device
        self.path: Path | None = None
        self.oom_path: Path | None = None
        self._observer_attached = False

    def __enter__(self) -> "record":
        torch = _torch()
        if not torch.cuda.is_available():
            raise RuntimeError("memtune.torch.record needs a CUDA device (torch.cuda.is_available()"
                               " is False)")
        start_history(self.max_entries, self.stacks, self.device)
        if self.oom_observer:
            self._observer_attached = attach_oom_observer(self.out_dir)
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        try:
            if exc is not None and is_out_of_memory(exc):
                self.oom_path = snapshot_path(self.out_dir, oom=True)
                if not (self._observer_attached and self.oom_path.exists()):
                    dump(self.oom_path)
            elif self.dump_on_exit:
                self.path = dump(out_dir=self.out_dir)
        finally:
            stop_history()
        return False  # never swallow the exception
