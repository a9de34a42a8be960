#!/usr/bin/env python3
"""Golden CLI tests: runs `memtune` for every tests/golden/<cmd>/<case>.args and compares
stdout (<case>.stdout), stderr (<case>.stderr, if present) and the exit code (<case>.code,
default 0). The .args file holds the arguments as a shell would split them; the command runs
with the case's folder as the working directory, TERM unset and COLUMNS=100.

    run_golden.py MEMTUNE_BINARY GOLDEN_DIR [CASE_FILTER]

MEMTUNE_UPDATE_GOLDEN=1 rewrites the expectations instead of comparing them.
"""
import difflib
import os
import pathlib
import shlex
import subprocess
import sys


def run_case(binary, args_path, update):
    folder = args_path.parent
    stem = args_path.with_suffix("")
    args = shlex.split(args_path.read_text())
    env = {k: v for k, v in os.environ.items() if k not in ("TERM", "PYTORCH_CUDA_ALLOC_CONF")}
    env["COLUMNS"] = "100"
    proc = subprocess.run([binary] + args, cwd=folder, env=env, capture_output=True,
                          timeout=120)
    actual = {
        ".stdout": proc.stdout.decode("utf-8", "replace"),
        ".stderr": proc.stderr.decode("utf-8", "replace"),
        ".code": f"{proc.returncode}\n",
    }
    if update:
        for suffix, text in actual.items():
            path = stem.with_suffix(suffix)
            keep = suffix == ".stdout" or text.strip() not in ("", "0")
            if keep:
                path.write_text(text)
            elif path.exists():
                path.unlink()
        return []
    failures = []
    for suffix, text in actual.items():
        path = stem.with_suffix(suffix)
        if path.exists():
            expected = path.read_text()
        else:
            expected = "0\n" if suffix == ".code" else ""
        if text == expected:
            continue
        diff = difflib.unified_diff(expected.splitlines(True), text.splitlines(True),
                                    f"{path.relative_to(folder.parent)} (expected)", "actual")
        failures.append("".join(diff))
    return failures


def main():
    binary, golden_dir = os.path.abspath(sys.argv[1]), pathlib.Path(sys.argv[2])
    case_filter = sys.argv[3] if len(sys.argv) > 3 else ""
    update = os.environ.get("MEMTUNE_UPDATE_GOLDEN") == "1"
    cases = sorted(p for p in golden_dir.glob("*/*.args") if case_filter in str(p))
    failed = 0
    for case in cases:
        problems = run_case(binary, case, update)
        if problems:
            failed += 1
            print(f"FAIL {case.relative_to(golden_dir)}")
            for p in problems:
                print(p)
    verb = "updated" if update else "passed"
    print(f"{len(cases) - failed}/{len(cases)} golden cases {verb}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
