"""Shared fixtures of the memtune package tests (run by ctest: tests/CMakeLists.txt sets
PYTHONPATH to <build>/python, MEMTUNE_CLI to the binary and MEMTUNE_SOURCE_DIR)."""
import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(os.environ.get("MEMTUNE_SOURCE_DIR", pathlib.Path(__file__).parents[3]))
EXAMPLE = "llama3-70b-32xh100"
# As the golden tests run the binary: the caller's allocator setting is not the job's.
os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)


@pytest.fixture(scope="session")
def root():
    return ROOT


@pytest.fixture(scope="session")
def cli():
    """Runs the memtune binary: cli(args, input=None) -> CompletedProcess (text)."""
    binary = os.environ.get("MEMTUNE_CLI")
    if not binary:
        pytest.skip("MEMTUNE_CLI (the memtune binary) is not set")

    def run(args, input=None, cwd=ROOT):
        return subprocess.run([binary] + list(args), input=input, capture_output=True,
                              text=True, cwd=cwd, timeout=300)

    return run


@pytest.fixture(scope="session")
def cli_json(cli):
    def run(args, input=None):
        proc = cli(list(args) + ["--format", "json"], input)
        assert proc.returncode in (0, 1), proc.stderr
        return json.loads(proc.stdout)

    return run
