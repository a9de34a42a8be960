#!/usr/bin/env python3
"""memtune calibration harness: runs training-step workloads that allocate like one
Megatron rank, once with the native allocator and once with expandable segments, each in
its own process, and writes validation cases, snapshots and a summary.

    run.py --out DIR [--dry-run] [--only NAME[,NAME]] [--gpu-memory-gb N]
    run.py --out DIR --report-only   # rebuild cases and summary from DIR/results
    run.py --probe        # JSON: is PyTorch with CUDA present?
    run.py --list         # the workloads

Output (DIR): cases.jsonl, jobs/<workload>.json, results/<workload>.<mode>.json,
snapshots/<workload>.<mode>.pickle.gz, summary.md, summary.json, environment.json.
See tools/calibrate/README.md and docs/calibrate.md.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import job_writer  # noqa: E402
import report  # noqa: E402
import workloads  # noqa: E402

MODES = ("native", "expandable")
DRY_CAPACITY_BYTES = 1 << 30      # nominal GPU size written into dry-run jobs
SNAPSHOT_MAX_ENTRIES = 200_000


def probe():
    """What the interpreter offers: PyTorch version, CUDA, the first device."""
    try:
        import torch
    except ImportError:
        return {"torch": None, "cuda": False}
    info = {"torch": torch.__version__, "cuda": bool(torch.cuda.is_available()),
            "cuda_version": torch.version.cuda, "nccl_version": _nccl_version(torch)}
    if info["cuda"]:
        props = torch.cuda.get_device_properties(0)
        info.update(device_name=props.name, total_memory=props.total_memory,
                    device_count=torch.cuda.device_count())
    return info


def _nccl_version(torch):
    """The NCCL PyTorch was built with, "2.27.7" (memtune.versions.nccl), or None."""
    try:
        version = torch.cuda.nccl.version()
    except Exception:  # a CPU-only build, or no NCCL
        return None
    if isinstance(version, tuple):
        return ".".join(str(v) for v in version)
    # Older releases return an int: 2708 (2.7.8) or, from 2.9, 21804 (2.18.4).
    major, rest = divmod(int(version), 10000 if int(version) >= 10000 else 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def _framebuffer():
    """nvidia-smi's framebuffer figures in bytes: total, reserved (the driver's, which CUDA
    never sees: memtune's driver_reserved) and used, or None."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total,memory.reserved,memory.used",
                              "--format=csv,noheader,nounits", "--id=0"],
                             capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            return None
        total, reserved, used = (int(v.strip()) for v in out.stdout.strip().split(","))
        mib = 1 << 20
        return {"total": total * mib, "reserved": reserved * mib, "used": used * mib,
                "unit": "MiB from nvidia-smi, as bytes"}
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def _driver_version():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
    except (OSError, IndexError, subprocess.SubprocessError):
        return None


def environment(info, dry):
    """environment.json: GPU, driver, CUDA, PyTorch and Python versions."""
    import platform
    env = dict(info, python=platform.python_version(), dry_run=dry,
               host=platform.machine())
    env["driver"] = None if dry else _driver_version()
    env["framebuffer"] = None if dry else _framebuffer()
    return env


def sized(names, dry, capacity_bytes):
    chosen = workloads.by_name(names)
    if dry:
        return [workloads.dry_workload(wl) for wl in chosen]
    return [workloads.size_workload(wl, capacity_bytes) for wl in chosen]


def _measure(args, wl, device, result):
    """Builds and steps the workload, filling `result` with what was measured."""
    import memory
    import runner
    deadline = time.time() + args.budget_s
    if args.dry_run:
        with memory.CpuPeak() as peak:
            rank, records, status = runner.run_workload(wl, device, args.iterations, deadline)
        result.update({metric: peak.peak_bytes() for metric in job_writer.METRICS})
        result["device_used_source"] = "CPU profiler peak (dry run)"
    else:
        rank, records, status = runner.run_workload(wl, device, args.iterations, deadline)
        result.update(memory.device_measurements(device))
    result.update(status=status, iterations=records, adam=rank.optimizer.impl)
    peaks = [r.get("max_allocated") for r in records]
    result["steady"] = None if args.dry_run or len(peaks) < 2 else peaks[-1] == peaks[-2]


def _run_one(args, wl, device, context):
    """One workload in this process: measurements, snapshot, status (OOM is a result)."""
    import memory
    result = {"workload": wl.name, "mode": args.mode, "dry": args.dry_run,
              "layers_per_chunk": wl.layers_per_chunk, "expected": workloads.expected_bytes(wl),
              "iterations": [], "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
              "device_used_at_start": context}
    snap = wl.snapshot and not args.dry_run and args.snapshots
    name = f"{wl.name}.{args.mode}.pickle.gz"
    started = time.time()
    if snap:
        memory.start_history(SNAPSHOT_MAX_ENTRIES)
    try:
        _measure(args, wl, device, result)
    except Exception as error:  # OOM and any other failure are results too
        result.update(status="oom" if "out of memory" in str(error).lower() else "error",
                      error=f"{type(error).__name__}: {str(error)[:2000]}")
        if not args.dry_run:
            result.update(memory.device_measurements(device))
    if snap:
        result["snapshot"] = "snapshots/" + name
        result["snapshot_note"] = memory.dump_snapshot(os.path.join(args.out, "snapshots", name))
        memory.stop_history()
    result["seconds"] = round(time.time() - started, 2)
    return result


def worker(args):
    """Runs the named workloads in this process (its allocator config is already set)."""
    import torch
    device = torch.device("cpu" if args.dry_run else "cuda:0")
    context = None
    if not args.dry_run:   # device memory in use with only the CUDA context
        torch.cuda.init()
        free_bytes, total_bytes = torch.cuda.mem_get_info(device)
        context = total_bytes - free_bytes
    for sub in ("results", "snapshots"):
        os.makedirs(os.path.join(args.out, sub), exist_ok=True)
    for wl in sized(args.worker, args.dry_run, args.capacity_bytes):
        result = _run_one(args, wl, device, context)
        with open(os.path.join(args.out, "results", f"{wl.name}.{args.mode}.json"), "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)
        if not args.dry_run:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
    return 0


def _spawn(args, names, mode, capacity_bytes, budget_s=None):
    """Starts a worker process with the mode's PYTORCH_CUDA_ALLOC_CONF."""
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if job_writer.ALLOC_CONF[mode]:
        env["PYTORCH_CUDA_ALLOC_CONF"] = job_writer.ALLOC_CONF[mode]
    budget_s = args.budget_s if budget_s is None else budget_s
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", ",".join(names),
           "--mode", mode, "--out", args.out, "--iterations", str(args.iterations),
           "--capacity-bytes", str(capacity_bytes), "--budget-s", str(budget_s)]
    cmd += ["--dry-run"] if args.dry_run else []
    cmd += [] if args.snapshots else ["--no-snapshots"]
    return subprocess.Popen(cmd, env=env)


def _wait(proc, timeout_s):
    """Waits for a worker; kills it on overrun. Returns its status text."""
    try:
        code = proc.wait(timeout=timeout_s)
        return "ok" if code == 0 else f"exit {code}"
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return f"timeout after {timeout_s:.0f} s"


def drive(args):
    info = probe()
    if info["torch"] is None:
        print("run.py: error: PyTorch is not installed for " + sys.executable, file=sys.stderr)
        return 2
    if not args.dry_run and not info["cuda"]:
        print("run.py: error: no GPU found (torch.cuda.is_available() is False); "
              "use --dry-run to run every workload on the CPU with small shapes",
              file=sys.stderr)
        return 2
    capacity = DRY_CAPACITY_BYTES if args.dry_run else int(
        args.gpu_memory_gb * 1e9 if args.gpu_memory_gb else info["total_memory"])
    chosen = sized(args.only, args.dry_run, capacity)
    try:
        for sub in ("results", "snapshots", "jobs"):
            os.makedirs(os.path.join(args.out, sub), exist_ok=True)
    except OSError as e:
        print(f"run.py: error: --out: cannot create '{args.out}': {e.strerror}", file=sys.stderr)
        return 2
    env = environment(info, args.dry_run)
    with open(os.path.join(args.out, "environment.json"), "w") as f:
        json.dump(env, f, indent=1, sort_keys=True)
    deadline = time.time() + args.budget_s
    spawn_status = {}
    if args.report_only:
        pass
    elif args.dry_run:   # one process per mode, side by side: CPU runs share no allocator
        names = [wl.name for wl in chosen]
        procs = {mode: _spawn(args, names, mode, capacity) for mode in args.modes}
        for mode, proc in procs.items():
            status = _wait(proc, max(1.0, deadline - time.time()))
            for wl in chosen:
                spawn_status[(wl.name, mode)] = status
    else:
        for wl in chosen:
            for mode in args.modes:
                left = deadline - time.time()
                if left < 10:
                    spawn_status[(wl.name, mode)] = "skipped: time budget spent"
                    continue
                limit = min(args.per_run_s, left)
                proc = _spawn(args, [wl.name], mode, capacity, budget_s=0.8 * limit)
                spawn_status[(wl.name, mode)] = _wait(proc, limit)
    return report.write(args.out, chosen, args.modes, spawn_status, env, capacity)


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="calibrate-out", help="output folder")
    p.add_argument("--dry-run", action="store_true", help="CPU, small shapes")
    p.add_argument("--only", default="", help="comma-separated workload names")
    p.add_argument("--gpu-memory-gb", type=float, default=0.0,
                   help="size the matrix for this GPU memory (GB, 1e9); default: the GPU's")
    p.add_argument("--iterations", type=int, default=0, help="steps (default 3, dry 2)")
    p.add_argument("--budget-s", type=float, default=540.0, help="whole-run time budget")
    p.add_argument("--per-run-s", type=float, default=90.0, help="time limit per process")
    p.add_argument("--modes", default=",".join(MODES), help="native,expandable")
    p.add_argument("--no-snapshots", dest="snapshots", action="store_false")
    p.add_argument("--report-only", action="store_true",
                   help="only rebuild cases and summary from OUT/results (after an abort)")
    p.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--list", action="store_true", help="list the workloads")
    p.add_argument("--worker", default="", help=argparse.SUPPRESS)
    p.add_argument("--mode", default="native", choices=MODES, help=argparse.SUPPRESS)
    p.add_argument("--capacity-bytes", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.iterations = args.iterations or (2 if args.dry_run else 3)
    args.modes = [m for m in args.modes.split(",") if m]
    for mode in args.modes:
        if mode not in MODES:
            p.error(f"--modes: unknown mode '{mode}'; allowed: {', '.join(MODES)}")
    return args


def main(argv):
    args = parse(argv)
    if args.probe:
        print(json.dumps(probe(), sort_keys=True))
        return 0
    if args.list:
        for wl in workloads.matrix():
            print(f"{wl.name:24} {wl.summary}")
        return 0
    try:
        if args.worker:
            return worker(args)
        return drive(args)
    except KeyError as error:
        print(f"run.py: error: --only: {error.args[0]}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
