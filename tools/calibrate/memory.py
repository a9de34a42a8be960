"""Memory measurement across PyTorch versions: allocator statistics, device memory in use
(NVML for this process, else cudaMemGetInfo), memory-history snapshots, and, for the CPU
dry run, the CPU allocator's peak from the profiler."""
import gzip
import os
import pickle

import torch

# Compressed snapshots must stay under 16 MiB; shrink below 15 MiB to keep a margin.
SNAPSHOT_TARGET_BYTES = 15 * 1024 * 1024


def iteration_record(device, seconds, grad_norm):
    """Peaks and current values after one training step."""
    record = {"seconds": round(seconds, 3), "grad_norm": grad_norm}
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        record.update(max_allocated=torch.cuda.max_memory_allocated(device),
                      max_reserved=torch.cuda.max_memory_reserved(device),
                      allocated=torch.cuda.memory_allocated(device),
                      reserved=torch.cuda.memory_reserved(device))
    return record


def _nvml_process_used(device_index):
    """Bytes NVML reports for this process on the device, or None without pynvml."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
        for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if proc.pid == os.getpid() and proc.usedGpuMemory is not None:
                return int(proc.usedGpuMemory)
    except Exception:  # NVML missing, no permission, or a container pid namespace
        return None
    return None


def device_measurements(device):
    """max_allocated, max_reserved, device_used (+ its source) and memory_stats()."""
    torch.cuda.synchronize(device)
    free_bytes, total_bytes = torch.cuda.mem_get_info(device)
    out = {
        "max_allocated": torch.cuda.max_memory_allocated(device),
        "max_reserved": torch.cuda.max_memory_reserved(device),
        "reserved_at_end": torch.cuda.memory_reserved(device),
        "mem_get_info": {"free": free_bytes, "total": total_bytes},
        "memory_stats": {k: v for k, v in torch.cuda.memory_stats(device).items()
                         if isinstance(v, (int, float))},
    }
    nvml = _nvml_process_used(device.index or 0)
    if nvml is not None:
        out.update(device_used=nvml, device_used_source="NVML usedGpuMemory of this process")
    else:
        out.update(device_used=total_bytes - free_bytes,
                   device_used_source="cudaMemGetInfo total - free on an otherwise idle GPU")
    return out


def start_history(max_entries):
    """Turns allocator tracing on: the 2.1+ signature, else 2.0's, else 1.13's (which
    records segment histories only, no trace)."""
    record = torch.cuda.memory._record_memory_history
    try:
        record(enabled="all", context="all", stacks="python", max_entries=max_entries)
    except TypeError:
        try:
            record(True, trace_alloc_max_entries=max_entries, trace_alloc_record_context=True)
        except TypeError:
            record(True)


def stop_history():
    try:
        torch.cuda.memory._record_memory_history(enabled=None)
    except TypeError:
        torch.cuda.memory._record_memory_history(False)


def _strip_frames(node):
    if isinstance(node, dict):
        node.pop("frames", None)
        node.pop("history", None)
        for value in node.values():
            _strip_frames(value)
    elif isinstance(node, list):
        for item in node:
            _strip_frames(item)


def shrink_snapshot(snapshot, limit=SNAPSHOT_TARGET_BYTES):
    """Returns (gzip bytes, note) of the snapshot dict under `limit`: first as is, then
    without stack frames, then keeping only the newest trace entries."""
    data = gzip.compress(pickle.dumps(snapshot), compresslevel=9)
    if len(data) <= limit:
        return data, "complete"
    _strip_frames(snapshot)
    data = gzip.compress(pickle.dumps(snapshot), compresslevel=9)
    note = "stack frames removed"
    traces = snapshot.get("device_traces") or []
    while len(data) > limit and any(len(t) > 1 for t in traces):
        for index, trace in enumerate(traces):
            traces[index] = trace[len(trace) // 2:]
        data = gzip.compress(pickle.dumps(snapshot), compresslevel=9)
        note = "stack frames removed, oldest trace entries dropped"
    return data, note


def dump_snapshot(path_gz):
    """Writes the allocator snapshot (the dict _dump_snapshot pickles) gzip-compressed to
    path_gz, under 16 MiB; returns a note on what was kept."""
    data, note = shrink_snapshot(torch.cuda.memory._snapshot())
    with open(path_gz, "wb") as f:
        f.write(data)
    return f"{note}; {len(data)} bytes compressed"


class _RawProfile(torch.autograd.profiler.profile):
    """The profiler without its (slow) Python event tree: only the raw records are kept."""

    def _parse_kineto_results(self, result):
        return []


class CpuPeak:
    """CPU allocator peak over a region (dry run only): the running sum of the profiler's
    allocation and free records, in time order."""

    def __enter__(self):
        self._prof = _RawProfile(profile_memory=True, use_kineto=True)
        self._prof.__enter__()
        return self

    def __exit__(self, *exc):
        self._prof.__exit__(*exc)
        return False

    def peak_bytes(self):
        records = [(e.start_us(), e.nbytes()) for e in self._prof.kineto_results.events()
                   if e.name() == "[memory]"]
        records.sort(key=lambda r: r[0])
        current = peak = 0
        for _, delta in records:
            current += delta
            peak = max(peak, current)
        return peak
