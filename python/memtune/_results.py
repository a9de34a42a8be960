"""Typed views over the CLI's JSON reports: keys as attributes, to_dict(), a readable repr.

The data is the report exactly as `memtune <command> --format json` prints it (its schema is
in the "schema" key); the classes only add names for what people ask first.
"""

from __future__ import annotations

import copy
from typing import Any


def _wrap(value: Any) -> Any:
    if isinstance(value, dict):
        return Record(value)
    if isinstance(value, list):
        return [_wrap(item) for item in value]
    return value


def _gb(num_bytes: int | float | None) -> str:
    return "-" if num_bytes is None else f"{num_bytes / 1e9:.2f} GB"


class Record:
    """A JSON object of a report: `r.key` and `r["key"]` read it, to_dict() copies it."""

    def __init__(self, data: dict):
        object.__setattr__(self, "_data", data)

    def __getattr__(self, name: str) -> Any:
        try:
            return _wrap(self._data[name])
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}; fields: "
                                 f"{', '.join(self._data)}") from None

    def __getitem__(self, key: str) -> Any:
        return _wrap(self._data[key])

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Record) and other._data == self._data

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._data))

    def keys(self):
        return self._data.keys()

    def to_dict(self) -> dict:
        """A deep copy of the report as plain dicts and lists (json.dumps-able)."""
        return copy.deepcopy(self._data)

    def _summary(self) -> str:
        shown = [f"{k}={v!r}" for k, v in self._data.items() if not isinstance(v, (dict, list))]
        nested = [k for k, v in self._data.items() if isinstance(v, (dict, list))]
        return ", ".join(shown[:6] + ([f"fields: {', '.join(nested)}"] if nested else []))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._summary()})"


class Estimate(Record):
    """`memtune estimate` (schema memtune.estimate/1): ranks, peak, gpu, verdict, allocator.

    verdict is the allocator verdict for the job's own PYTORCH_CUDA_ALLOC_CONF: "fits",
    "at_risk" or "oom" (verdicts holds both allocators); fits is verdict == "fits".
    """

    @property
    def verdicts(self) -> Record:
        return Record(self._data["verdict"])

    @property
    def verdict(self) -> str:
        entries = self._data.get("verdict") or {}
        own = [v for v in entries.values() if v.get("job_config")]
        if own or entries:
            return (own or list(entries.values()))[0]["state"]
        fits = self._data.get("gpu", {}).get("fits")  # no allocator replay: the allocated fit
        return "unknown" if fits is None else ("fits" if fits else "oom")

    @property
    def fits(self) -> bool:
        return self.verdict == "fits"

    @property
    def peak_bytes(self) -> int:
        """Peak allocated bytes on the most loaded pipeline rank."""
        return self._data["peak"]["allocated_bytes"]

    def __repr__(self) -> str:
        peak = self._data["peak"]
        gpu = self._data.get("gpu", {})
        return (f"Estimate(verdict={self.verdict!r}, peak={_gb(peak['allocated_bytes'])} on "
                f"pp rank {peak['pp_rank']}, gpu={gpu.get('name', '?')!r}, "
                f"ranks={len(self._data['ranks'])})")


class Check(Record):
    """`memtune check` (memtune.check/1): findings (rule, severity, message), errors, warnings."""

    @property
    def ok(self) -> bool:
        return self._data["errors"] == 0

    def __repr__(self) -> str:
        rules = [f.get("rule_id", "?") for f in self._data["findings"]]
        return (f"Check(errors={self._data['errors']}, warnings={self._data['warnings']}, "
                f"rules={rules})")


class Assessment(Estimate):
    """assess(): the estimate report plus the check findings (key "check")."""

    @property
    def check(self) -> Check:
        return Check(self._data["check"])

    def __repr__(self) -> str:
        check = self._data["check"]
        return (super().__repr__().replace("Estimate(", "Assessment(", 1)[:-1] +
                f", check_errors={check['errors']}, check_warnings={check['warnings']})")


class Plan(Record):
    """`memtune plan` (memtune.plan/1): current, candidates ranked by predicted throughput."""

    def __repr__(self) -> str:
        return (f"Plan(gpus={self._data.get('gpus')}, candidates="
                f"{len(self._data.get('candidates', []))}, "
                f"nothing_fits={self._data.get('nothing_fits')!r})")


class Diagnosis(Record):
    """`memtune diagnose` (memtune.diagnose/1)."""


class Inspection(Record):
    """`memtune inspect` (memtune.inspect/1): a snapshot's state, peaks, OOMs and sites."""


class Replay(Record):
    """`memtune replay` (memtune.replay/1): a snapshot's trace through the simulator."""


class Simulation(Record):
    """`memtune simulate` (memtune.simulate/1): an allocation trace through the simulator."""


class Validation(Record):
    """`memtune validate` (memtune.validate/1): predictions against measured runs."""


class EffectiveJob(Record):
    """`memtune job` (memtune.job/1): the job as memtune understood it, defaults used."""


class Lint(Record):
    """`memtune lint`: findings in launch files."""
