#!/usr/bin/python3
"""Peer comparison for the snapshot reader: Python's own pickle.load vs `memtune inspect`
on the same snapshot file, min-of-N wall time (see docs/performance.md, "Snapshot reader").

Writes a synthetic snapshot shaped like torch.cuda.memory._dump_snapshot() output (segments
with blocks, one device trace, shared frame lists, allocator settings; protocol 4) unless
--file names an existing one, then times:
  * pickle.load(open(file, "rb"))             (the peer: what every Python tool does first)
  * memtune inspect FILE --format json        (whole program: read + parse + analyse + print)

    /usr/bin/python3 bench/pickle_load_peer.py --memtune build/memtune [--entries 1000000]
"""
import argparse
import os
import pickle
import resource
import subprocess
import tempfile
import time

MiB = 1 << 20


def synthetic_snapshot(entries, segments=2000, blocks=10, stacks=100, depth=8):
    frame_lists = [[{"name": f"function_{s * depth + f}",
                     "filename": f"/workspace/project/module_{f}.py", "line": 10 + s + f}
                    for f in range(depth)] for s in range(stacks)]
    segs = []
    for s in range(segments):
        base = 0x7F0000000000 + s * 64 * MiB
        segs.append({
            "device": 0, "address": base, "total_size": blocks * 2 * MiB, "stream": 0,
            "segment_type": "large", "is_expandable": False,
            "blocks": [{"address": base + b * 2 * MiB, "size": 2 * MiB,
                        "requested_size": 2 * MiB - 100,
                        "state": "inactive" if b % 3 == 0 else "active_allocated",
                        "frames": frame_lists[(s + b) % stacks]} for b in range(blocks)]})
    actions = ["alloc", "free_requested", "free_completed", "segment_alloc"]
    trace = [{"action": actions[i % 4], "addr": 0x7F0000000000 + (i % 5000) * 4096,
              "size": 4096 + (i % 977) * 512, "stream": 0, "time_us": 1_700_000_000_000_000 + i,
              "compile_context": "N/A", "user_metadata": "", "frames": frame_lists[i % stacks]}
             for i in range(entries)]
    return {"segments": segs, "device_traces": [trace],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                                   "expandable_segments": True}}


def cpu_seconds():
    """CPU time (user + system) of this process and its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def min_time(fn, repeat):
    """(best wall seconds, best CPU seconds) over `repeat` runs. CPU time is the figure to
    compare on a shared machine; wall time includes waiting for a core."""
    best_wall = best_cpu = float("inf")
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), cpu_seconds()
        fn()
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, cpu_seconds() - cpu)
    return best_wall, best_cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=300_000, help="trace entries (default 300000)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per measurement; the minimum counts")
    ap.add_argument("--file", help="an existing snapshot pickle to time instead of a synthetic one")
    ap.add_argument("--memtune", help="memtune binary to compare (optional)")
    args = ap.parse_args()

    path = args.file
    if path is None:
        fd, path = tempfile.mkstemp(suffix=".pickle")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(synthetic_snapshot(args.entries), f, protocol=4)
    size_mb = os.path.getsize(path) / 1e6

    def load():
        with open(path, "rb") as f:
            pickle.load(f)

    py_wall, py_cpu = min_time(load, args.repeat)
    print(f"file: {path} ({size_mb:.1f} MB), min of {args.repeat}")
    print(f"python pickle.load:       wall {py_wall * 1000:8.1f} ms  cpu {py_cpu * 1000:8.1f} ms"
          f"  {size_mb / py_cpu:7.1f} MB/s (cpu)")
    if args.memtune:
        cmd = [args.memtune, "inspect", path, "--format", "json"]
        mt_wall, mt_cpu = min_time(lambda: subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL),
                                   args.repeat)
        print(f"memtune inspect (whole):  wall {mt_wall * 1000:8.1f} ms  cpu {mt_cpu * 1000:8.1f} ms"
              f"  {size_mb / mt_cpu:7.1f} MB/s (cpu)")
        print(f"ratio pickle.load / memtune inspect: {py_cpu / mt_cpu:.2f}x (cpu), "
              f"{py_wall / mt_wall:.2f}x (wall)")
    if args.file is None:
        os.unlink(path)


if __name__ == "__main__":
    main()
