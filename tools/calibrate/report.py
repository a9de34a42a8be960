"""Collects the per-run results into validation cases, job files and a summary table."""
import json
import os

import job_writer

GIB = float(1 << 30)
MIB = float(1 << 20)


def _load(out, name, mode):
    path = os.path.join(out, "results", f"{name}.{mode}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def _size(value, unit):
    return "-" if value is None else f"{value / unit:.2f}"


def _row(wl, mode, result, spawn):
    if result is None:
        return {"workload": wl.name, "mode": mode, "status": spawn, "layers_per_chunk":
                wl.layers_per_chunk}
    return {
        "workload": wl.name, "mode": mode, "status": result.get("status"),
        "layers_per_chunk": wl.layers_per_chunk,
        "max_allocated": result.get("max_allocated"),
        "max_reserved": result.get("max_reserved"),
        "device_used": result.get("device_used"),
        "harness_expected": result["expected"]["total"],
        "in_flight": result["expected"]["in_flight"],
        "steady": result.get("steady"), "seconds": result.get("seconds"),
        "snapshot": result.get("snapshot"), "error": result.get("error"),
    }


def _table(rows, dry):
    unit, name = (MIB, "MiB") if dry else (GIB, "GiB")
    lines = [f"| workload | mode | status | layers/chunk | in flight | max_allocated {name} | "
             f"max_reserved {name} | device_used {name} | harness expected {name} | steady | s |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['mode']} | {r['status']} | {r['layers_per_chunk']} | "
            f"{r.get('in_flight', '-')} | {_size(r.get('max_allocated'), unit)} | "
            f"{_size(r.get('max_reserved'), unit)} | {_size(r.get('device_used'), unit)} | "
            f"{_size(r.get('harness_expected'), unit)} | {r.get('steady', '-')} | "
            f"{r.get('seconds', '-')} |")
    return "\n".join(lines) + "\n"


def write(out, chosen, modes, spawn_status, env, capacity_bytes):
    """Writes cases.jsonl, jobs/, summary.md and summary.json; prints the table.
    Returns 0 when every run finished, 1 otherwise."""
    rows, all_cases = [], []
    for wl in chosen:
        with open(os.path.join(out, "jobs", f"{wl.name}.json"), "w") as f:
            json.dump(job_writer.job_document(wl, "native", capacity_bytes), f, indent=1)
        for mode in modes:
            result = _load(out, wl.name, mode)
            rows.append(_row(wl, mode, result, spawn_status.get((wl.name, mode))))
            if result is not None:
                all_cases += job_writer.cases(wl, mode, result, env, capacity_bytes)
    with open(os.path.join(out, "cases.jsonl"), "w") as f:
        for case in all_cases:
            f.write(json.dumps(case, sort_keys=False) + "\n")
    title = ("# Calibration summary (DRY RUN: CPU, tiny shapes, not GPU measurements)\n\n"
             if env.get("dry_run") else
             f"# Calibration summary: {env.get('device_name')}, PyTorch {env.get('torch')}, "
             f"CUDA {env.get('cuda_version')}, driver {env.get('driver')}\n\n")
    table = _table(rows, bool(env.get("dry_run")))
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(title + table)
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"schema": "memtune.calibrate-summary/1", "environment": env,
                   "capacity_bytes": capacity_bytes, "runs": rows,
                   "cases": len(all_cases)}, f, indent=1)
    print(title + table, end="")
    print(f"{len(all_cases)} cases written to {os.path.join(out, 'cases.jsonl')}")
    return 0 if all(r["status"] == "ok" for r in rows) else 1
