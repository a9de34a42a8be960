"""A pre-launch memory check for Megatron-Bridge recipes and training scripts.

Two lines before training starts:

    import memtune.bridge
    memtune.bridge.check(cfg, strict=True)   # cfg: the recipe's ConfigContainer

`cfg` is read through cfg.to_dict() with Bridge's field names and nesting (model, train,
optimizer, ddp, mixed_precision, peft, dataset, ...): the same job document memtune reads from
`cfg.to_yaml()` dumps, with Bridge's effective-value rules (docs/job-format.md). The world
size comes from the memtune section when the config has one, else from WORLD_SIZE.
"""

from __future__ import annotations

import json
import os
from typing import Any

from . import _cli, assess
from ._results import Assessment


class PredictedOutOfMemory(RuntimeError):
    """check(strict=True) predicts that the job runs out of GPU memory; .assessment has why."""

    def __init__(self, message: str, assessment: Assessment):
        super().__init__(message)
        self.assessment = assessment


def _with_world_size(cfg: Any) -> Any:
    """cfg as a document, with memtune.world_size from WORLD_SIZE when it names none."""
    path, text = _cli.job_input(cfg)
    if path is not None or "WORLD_SIZE" not in os.environ:
        return cfg if path is not None else text
    try:
        doc = json.loads(text)
    except ValueError:
        return text  # YAML text: left as given
    doc.setdefault("memtune", {}).setdefault("world_size", int(os.environ["WORLD_SIZE"]))
    return doc


def check(cfg: Any, num_microbatches: int | None = None, gpu: str | None = None,
          strict: bool = False, **options: Any) -> Assessment:
    """Assess a Bridge ConfigContainer (or its to_dict()) before training starts.

    num_microbatches: per step (default global / (micro * data-parallel), as Bridge);
    gpu: a catalog name or a capacity ("80GiB"; default: the config's memtune.gpu).
    Returns memtune.assess's Assessment (.verdict "fits" / "at_risk" / "oom", .advice,
    .check). strict=True raises PredictedOutOfMemory when the verdict is "oom", and a
    JobError (a bad field) always propagates. Other keywords are assess()'s.

    Example:
        >>> a = memtune.bridge.check(cfg, gpu="h100-sxm-80gb", strict=True)
        >>> a.verdict
        'fits'
    """
    result = assess(_with_world_size(cfg), microbatches=num_microbatches, gpu=gpu, **options)
    if strict and result.verdict == "oom":
        advice = "; ".join(str(a.get("text", a)) if isinstance(a, dict) else str(a)
                           for a in result.to_dict().get("advice", []))
        raise PredictedOutOfMemory(
            f"memtune: this job is predicted to run out of GPU memory "
            f"(peak {result.peak_bytes / 1e9:.2f} GB on pipeline rank "
            f"{result.to_dict()['peak']['pp_rank']})" + (f"; {advice}" if advice else ""),
            result)
    return result
