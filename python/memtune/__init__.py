"""memtune: will this training job fit in GPU memory, why did it run out, what fixes it.

The Python face of the memtune library. Every function runs the same code as the `memtune`
command (the command table is linked into memtune._core) and returns its JSON report as a
typed object, so the numbers are the CLI's. A job is a dict, a YAML/JSON string, a path, or
any object with to_dict() / to_yaml() such as a Megatron-Bridge ConfigContainer; the job
flags of the CLI are keyword arguments (tp=8, gpu="h100-sxm-80gb", set={"model.seq_length":
8192}, env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}).

Example:
    >>> import memtune
    >>> memtune.estimate(example="llama3-70b-32xh100").verdict
    'at_risk'

See docs/python.md; memtune.bridge (pre-launch check) and memtune.torch (snapshots).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Any, Iterator

from . import _core
from ._cli import JobError, MemtuneError, MemtuneWarning, flags, job_input, run, run_json
from ._results import (Assessment, Check, Diagnosis, EffectiveJob, Estimate, Inspection, Lint,
                       Plan, Record, Replay, Simulation, Validation)

__version__ = "0.1.0"
__all__ = [
    "assess", "estimate", "check", "plan", "job", "validate", "diagnose", "lint", "inspect",
    "replay", "simulate", "models", "gpus", "run_cli", "JobError", "MemtuneError",
    "MemtuneWarning", "Record", "Estimate", "Assessment", "Check", "Plan", "Diagnosis",
    "Inspection", "Replay", "Simulation", "Validation", "EffectiveJob", "Lint",
]


def _job_args(job: Any, example: str | None, options: dict) -> tuple[list[str], str | None]:
    """The positional JOB (or '-' with the document on stdin), --example, and the flags."""
    path, text = job_input(job)
    args = [path] if path else (["-"] if text is not None else [])
    if example:
        args += ["--example", example]
    return args + flags(options), text


def estimate(job: Any = None, *, example: str | None = None, mode: str | None = None,
             microbatches: int | None = None, **options: Any) -> Estimate:
    """Per-GPU peak memory of a training job, pipeline rank by pipeline rank.

    Same as `memtune estimate JOB --format json`. mode: "accurate" (default), "megatron-lm"
    or "bridge"; microbatches: per step (default global / (micro * data-parallel)); other
    keywords are the CLI's flags (tp, pp, gpu, seq, mbs, gbs, set, env, alloc_conf, ...).
    Raises JobError for a job memtune rejects.

    Example:
        >>> e = memtune.estimate({"model": {"preset": "llama3-70b",
        ...                                 "tensor_model_parallel_size": 4,
        ...                                 "pipeline_model_parallel_size": 4},
        ...                       "train": {"micro_batch_size": 1, "global_batch_size": 64},
        ...                       "memtune": {"world_size": 32, "gpu": "h100-sxm-80gb"}})
        >>> e.verdict, e.peak_bytes
    """
    args, stdin = _job_args(job, example, dict(options, mode=mode, microbatches=microbatches))
    return Estimate(run_json(["estimate"] + args, stdin))


def check(job: Any = None, *, example: str | None = None, **options: Any) -> Check:
    """The Megatron/Bridge parallelism and memory rules a job breaks (`memtune check`).

    Findings do not raise: read .ok, .errors, .findings. A document memtune cannot read
    raises JobError.

    Example:
        >>> memtune.check(example="llama3-70b-32xh100").ok
        True
    """
    args, stdin = _job_args(job, example, options)
    return Check(run_json(["check"] + args, stdin, ok_codes=(0, 1)))


def assess(job: Any = None, *, example: str | None = None, mode: str | None = None,
           microbatches: int | None = None, **options: Any) -> Assessment:
    """The full assessment of a job: the estimate (memory, allocator verdict, advice) and the
    rule check, in one object (attribute .check). The call memtune.bridge.check makes.

    Example:
        >>> a = memtune.assess(example="llama3-70b-32xh100", gpu="h100-sxm-80gb")
        >>> a.verdict, a.check.errors
        ('at_risk', 0)
    """
    report = estimate(job, example=example, mode=mode, microbatches=microbatches,
                      **options).to_dict()
    report["check"] = check(job, example=example, **options).to_dict()
    return Assessment(report)


def plan(job: Any = None, *, example: str | None = None, **options: Any) -> Plan:
    """The changes that make a job fit, ranked by predicted throughput (`memtune plan`).

    keep=[field, ...] holds fields at the job's value; limit, max_simulations as the CLI.

    Example:
        >>> p = memtune.plan(example="llama3-70b-32xh100", limit=3)
        >>> [c.changes for c in p.candidates]
    """
    args, stdin = _job_args(job, example, options)
    return Plan(run_json(["plan"] + args, stdin))


def job(job: Any = None, *, example: str | None = None, **options: Any) -> EffectiveJob:
    """The effective job memtune understood: defaults, Bridge rules applied (`memtune job`).

    Example:
        >>> memtune.job({"model": {"preset": "llama3-8b"}}).job.model.num_layers
        32
    """
    args, stdin = _job_args(job, example, options)
    return EffectiveJob(run_json(["job"] + args, stdin))


@contextlib.contextmanager
def _job_file(job: Any) -> Iterator[str | None]:
    """A path for `job` (a temporary JSON/YAML file when it is not one already)."""
    path, text = job_input(job)
    if text is None:
        yield path
        return
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(text)
    try:
        yield f.name
    finally:
        os.unlink(f.name)


def diagnose(*inputs: Any, text: str | None = None, job: Any = None,
             example: str | None = None, **options: Any) -> Diagnosis:
    """The cause of an OOM from its message, a log, nvidia-smi output or a snapshot.

    inputs are files (paths); text is the message itself (what the CLI reads on stdin). With
    a job (or example) the fixes are priced by the planner (`memtune diagnose --job`).

    Example:
        >>> d = memtune.diagnose(text="torch.OutOfMemoryError: CUDA out of memory. Tried to "
        ...     "allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.50 GiB "
        ...     "is free.")
        >>> d.to_dict()["schema"]
        'memtune.diagnose/1'
    """
    if not inputs and text is None:
        raise TypeError("diagnose: give a file or text=")
    with _job_file(job) as job_path:
        args = ["diagnose"] + [os.fspath(i) for i in inputs] + (["-"] if text is not None else [])
        args += (["--job", job_path] if job_path else []) + (["--example", example] if example
                                                             else [])
        return Diagnosis(run_json(args + flags(options), text))


def validate(cases: str | os.PathLike, **options: Any) -> Validation:
    """Predict measured runs (a JSON Lines file of validation cases) and report the errors.

    Example:
        >>> v = memtune.validate("tests/data/measured-public.jsonl", compare="bridge")
    """
    return Validation(run_json(["validate", os.fspath(cases)] + flags(options)))


def inspect(snapshot: str | os.PathLike, **options: Any) -> Inspection:
    """Summarise a PyTorch memory snapshot (pickle, optionally gzip'd): state, peaks, OOMs,
    allocation sites (`memtune inspect`). frames, top as the CLI.

    Example:
        >>> memtune.inspect("snapshot_oom_rank-0.pickle").to_dict()["schema"]
        'memtune.inspect/1'
    """
    return Inspection(run_json(["inspect", os.fspath(snapshot)] + flags(options)))


def replay(snapshot: str | os.PathLike, **options: Any) -> Replay:
    """Replay a snapshot's trace through the allocator simulator, optionally under another
    allocator configuration (alloc_conf="expandable_segments:True", capacity="79GiB").

    Example:
        >>> memtune.replay("snapshot_oom_rank-0.pickle", alloc_conf="expandable_segments:True")
    """
    return Replay(run_json(["replay", os.fspath(snapshot)] + flags(options)))


def simulate(trace: str | os.PathLike, *, capacity: str, **options: Any) -> Simulation:
    """Replay an allocation trace (docs/trace-format.md) through PyTorch's caching allocator.

    Example:
        >>> memtune.simulate("tests/data/traces/section49_example1.trace", capacity="80GiB")
    """
    return Simulation(run_json(["simulate", os.fspath(trace), "--capacity", capacity] +
                               flags(options)))


def lint(*files: str | os.PathLike, **options: Any) -> Lint:
    """Lint launch files (`memtune lint`; needs a memtune with the lint command).

    Example:
        >>> memtune.lint("train.sh").to_dict()
    """
    return Lint(run_json(["lint"] + [os.fspath(f) for f in files] + flags(options),
                         ok_codes=(0, 1)))


def models(name: str | None = None) -> list[Record] | Record:
    """The model catalog (`memtune models`): a list of entries, or one entry by name.

    Example:
        >>> [m.name for m in memtune.models()][:2]
    """
    if name:
        return Record(run_json(["models", name])["models"][0])
    return [Record(m) for m in run_json(["models"])["models"]]


def gpus(name: str | None = None) -> list[Record] | Record:
    """The GPU catalog (`memtune gpus`): a list of entries, or one entry by name.

    Example:
        >>> memtune.gpus("h100-sxm-80gb").total_memory_bytes
        85520809984
    """
    if name:
        return Record(run_json(["gpus", name])["gpus"][0])
    return [Record(g) for g in run_json(["gpus"])["gpus"]]


def run_cli(args: list[str], stdin: str | None = None) -> tuple[int, str, str]:
    """Run any memtune subcommand in this process: (exit code, stdout, stderr).

    Example:
        >>> memtune.run_cli(["units", "80GiB"])[0]
        0
    """
    code, out, err, _ = _core.run_cli([str(a) for a in args], stdin)
    return code, out, err
