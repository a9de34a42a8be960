"""Every command in skills/memtune/*.md runs and prints what the skill shows under it.

A ```console block holds `$ COMMAND` lines, each followed by the lines it must print: each
must equal a line of the command's output (stdout and stderr), in order; other lines may
come between. Commands run with bash in the repository root, with `memtune` the built binary
and `python3` this interpreter with the built package.
"""
import os
import pathlib
import re
import subprocess
import sys

import pytest

from conftest import ROOT

SKILL_FILES = sorted((ROOT / "skills/memtune").glob("*.md"))
BLOCK = re.compile(r"^```console\n(.*?)^```", re.S | re.M)


def commands():
    for path in SKILL_FILES:
        for block in BLOCK.findall(path.read_text()):
            current = None
            for line in block.splitlines():
                if line.startswith("$ "):
                    if current:
                        yield current
                    current = (path.name, line[2:], [])
                elif current and line.strip():
                    current[2].append(line.rstrip())
            if current:
                yield current


CASES = list(commands())


def test_the_skill_has_commands():
    assert len(CASES) >= 10
    assert {name for name, _, _ in CASES} == {"SKILL.md", "CARD.md"}


@pytest.fixture(scope="module")
def tools(tmp_path_factory):
    binary = os.environ.get("MEMTUNE_CLI")
    if not binary:
        pytest.skip("MEMTUNE_CLI (the memtune binary) is not set")
    bin_dir = tmp_path_factory.mktemp("bin")
    (bin_dir / "memtune").symlink_to(binary)
    (bin_dir / "python3").symlink_to(sys.executable)
    env = {k: v for k, v in os.environ.items() if k != "PYTORCH_CUDA_ALLOC_CONF"}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "100"
    return env


@pytest.mark.parametrize("name,command,expected", CASES,
                         ids=[f"{n}:{c[:60]}" for n, c, _ in CASES])
def test_command_prints_what_the_skill_shows(tools, name, command, expected):
    proc = subprocess.run(["bash", "-c", command], cwd=ROOT, env=tools,
                          capture_output=True, text=True, timeout=300)
    output = [line.rstrip() for line in (proc.stdout + proc.stderr).splitlines()]
    assert proc.returncode == 0, f"{command}\n{proc.stderr}"
    position = 0
    for line in expected:
        assert line in output[position:], f"{name}: `{command}` did not print:\n{line}\n" \
                                          f"output:\n" + "\n".join(output)
        position = output.index(line, position) + 1
