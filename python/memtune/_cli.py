"""The one path from Python to memtune: the CLI's command table in this process (_core.run_cli).

Every function of the package builds the argument list the `memtune` binary would get, runs
it here, and reads the JSON report (--format json), so its numbers and error text are the
binary's. Nothing here models memory.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import re
import warnings
from typing import Any, Iterable

from . import _core


class MemtuneError(Exception):
    """memtune could not run the command (usage error, unreadable file, internal error).

    str(error) is the text the binary prints on stderr; `exit_code` is its exit status.
    """

    def __init__(self, text: str, exit_code: int = 2):
        super().__init__(text)
        self.text = text
        self.exit_code = exit_code


class JobError(MemtuneError, ValueError):
    """An input memtune rejects, with the field path, the value and what is allowed.

    Attributes: field ("model.tensor_model_parallel_size"; "" when none), value (the
    offending value as the message quotes it, or None), allowed (list of allowed values
    when the message lists them, else None), message (the library's sentence), hint (the
    suggestion), code ("invalid_config", "invalid_input", "not_found", "unsupported").
    str(error) is the CLI's error line, e.g. "memtune estimate: error: mixed_precision =
    'foo' is not a Bridge mixed-precision preset ...".

    Example:
        >>> try:
        ...     memtune.estimate({"model": {"preset": "llama3-70b",
        ...                                 "tensor_model_parallel_size": 3}})
        ... except memtune.JobError as e:
        ...     print(e.field)
        memtune.world_size
    """

    def __init__(self, text: str, field: str, value: str | None, allowed: list[str] | None,
                 message: str, hint: str = "", code: str = "invalid_input", exit_code: int = 2):
        super().__init__(text, exit_code)
        self.field = field
        self.value = value
        self.allowed = allowed
        self.message = message
        self.hint = hint
        self.code = code


class MemtuneWarning(UserWarning):
    """A warning the CLI prints ("memtune estimate: warning: ...")."""


_VALUE = re.compile(r"^\S+ = ('[^']*'|\S+)")
_ALLOWED = re.compile(r"allowed: (.*?)(?:$|; |\))")


def _job_error(text: str, error: dict, exit_code: int) -> JobError:
    message, field = error["message"], error["field"]
    value = None
    match = _VALUE.match(message)
    if match and message.startswith(field + " = "):
        value = match.group(1).strip("'")
    allowed = None
    for part in (message, error["hint"]):
        found = _ALLOWED.search(part)
        if found:
            allowed = [item.strip() for item in found.group(1).split(", ")]
            break
    return JobError(text, field, value, allowed, message, error["hint"], error["code"],
                    exit_code)


def _error_text(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if ": warning: " not in line]
    return "\n".join(lines).strip()


def run(args: list[str], stdin: str | None = None, ok_codes: Iterable[int] = (0,)) -> str:
    """Runs `memtune ARGS` and returns its stdout; raises JobError / MemtuneError otherwise.

    The CLI's warnings are re-issued as MemtuneWarning.
    """
    code, out, err, error = _core.run_cli([str(a) for a in args], stdin)
    for line in err.splitlines():
        if ": warning: " in line:
            warnings.warn(line, MemtuneWarning, stacklevel=4)  # the user's call
    if code in ok_codes:
        return out
    text = _error_text(err) or f"memtune {args[0] if args else ''}: exit status {code}"
    if error is not None and error["code"] != "internal":
        raise _job_error(text, error, code)
    raise MemtuneError(text, code)


def run_json(args: list[str], stdin: str | None = None, ok_codes: Iterable[int] = (0,)) -> Any:
    """run() with --format json appended, the report parsed."""
    return json.loads(run(list(args) + ["--format", "json"], stdin, ok_codes))


def _jsonable(value: Any) -> Any:
    """json.dumps default= for what a Bridge ConfigContainer.to_dict() may hold."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if callable(value) and hasattr(value, "__qualname__"):
        # As Bridge's to_yaml writes a function: {_target_: module.name, _call_: false}.
        return {"_target_": f"{value.__module__}.{value.__qualname__}", "_call_": False}
    return str(value)  # torch.bfloat16 -> "torch.bfloat16", as Bridge's YAML names dtypes


def job_input(job: Any) -> tuple[str | None, str | None]:
    """(path, document text) for `job`: a path, a YAML/JSON string, a dict, or an object with
    to_dict() or to_yaml() (a Bridge ConfigContainer). Exactly one is set; both None for None.
    """
    if job is None:
        return None, None
    if isinstance(job, os.PathLike):
        return os.fspath(job), None
    if isinstance(job, str):
        if "\n" not in job and os.path.exists(job):
            return job, None
        return None, job
    if not isinstance(job, dict):
        if callable(getattr(job, "to_dict", None)):
            job = job.to_dict()
        elif callable(getattr(job, "to_yaml", None)):
            text = job.to_yaml()
            if not isinstance(text, str):
                raise TypeError("job.to_yaml() returned no text; pass job.to_dict() instead")
            return None, text
        else:
            raise TypeError(f"job: expected a dict, a YAML/JSON string, a path or an object "
                            f"with to_dict(); got {type(job).__name__}")
    return None, json.dumps(job, default=_jsonable)


def flags(options: dict[str, Any]) -> list[str]:
    """Keyword options -> CLI flags: tp=4 -> --tp 4, sp=True -> --sp, set={"a.b": 1} ->
    --set a.b=1 (values as YAML), env={"N": "0"} -> --env N=0, a list -> the flag repeated.
    None and False are left out.
    """
    out: list[str] = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        name = "--" + key.rstrip("_").replace("_", "-")
        if value is True:
            out.append(name)
        elif isinstance(value, dict):
            for path, item in value.items():
                text = item if key == "env" else json.dumps(item, default=_jsonable)
                out += [name, f"{path}={text}"]
        elif isinstance(value, (list, tuple)):
            for item in value:
                out += [name, str(item)]
        else:
            out += [name, str(value)]
    return out
