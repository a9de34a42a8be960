#!/usr/bin/env python3
"""Runs every case of the bad-input corpus (../shared/data/bad-inputs, issue 22) against the
memtune binary and checks each against tests/data/bad_inputs_expected.tsv.

    python3 test_bad_inputs.py MEMTUNE_BINARY [CASE_ID_REGEX]

The corpus is read, never copied: its generators write the inputs into a temporary folder,
then each command of all_cases.tsv runs there with `memtune` replaced by the binary, under a
CPU-time limit (MEMTUNE_BAD_INPUT_SECONDS, default 10 s; CPU time, because wall time on a
shared machine measures the load, and a wall limit of six times that catches a stall) and a
memory limit of 2 GiB (the address
space; under a sanitizer, which reserves a large shadow, ASan's hard_rss_limit_mb instead).
Every run must end without a signal, without exit 3 (internal error) and within both limits,
and with the outcome the table gives:

- `error`: exit 1 or 2, and the first stderr line that is not a warning names the program
  (`memtune: ...`, `run.py: error: ...`): one line naming the field, the value and what is
  allowed;
- `ok`: exit 0;
- `exit N`: exit N (a run that reports its own outcome, e.g. --fail-if-oom);
- `contains TEXT`: the output (stdout and stderr) holds TEXT, e.g. the rule id a validate
  report names for a case it did not predict;
- `any`: only the limits above are checked;
- `ok-slow`: a success known to take longer than the CPU limit (the reason says why); it runs
  under three times the limit and is reported as a note when over it, so it stays visible;
- `partB`: owned by the snapshot work (issue 22 part B); run and reported, not asserted.

Exits 0 without running anything when the corpus folder is absent (set MEMTUNE_BAD_INPUTS to
point at another copy).
"""
import csv
import os
import pathlib
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(os.environ.get("MEMTUNE_SOURCE_DIR",
                                   pathlib.Path(__file__).resolve().parents[2]))
CORPUS = pathlib.Path(os.environ.get("MEMTUNE_BAD_INPUTS",
                                     ROOT.parent / "shared" / "data" / "bad-inputs"))
EXPECTED = ROOT / "tests" / "data" / "bad_inputs_expected.tsv"
LIMIT_S = float(os.environ.get("MEMTUNE_BAD_INPUT_SECONDS", "10"))  # CPU seconds
WALL_S = 6 * LIMIT_S  # the machine may be shared: wall time only guards against a stall
LIMIT_BYTES = 2 << 30
GENERATORS = ["gen_job.py", "gen_margs.py", "gen_hf.py", "gen_trace.py", "gen_pickle.py",
              "gen_jsonl.py", "gen_flags.py"]
KINDS = ["job", "margs", "hf", "trace", "pickle", "jsonl"]


def sanitized(binary):
    """True for an ASan build (its shadow memory cannot live under an address-space cap)."""
    proc = subprocess.run(["nm", "-D", "--defined-only", binary], capture_output=True,
                          text=True)
    return "__asan_init" in proc.stdout or "__asan" in proc.stdout


def write_inputs(work):
    (work / "markers").mkdir()
    for kind in KINDS:
        (work / "cases" / kind).mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "data" / "measured-public.jsonl", work)
    env = dict(os.environ, PYTHONPATH=str(CORPUS / "generators"))
    for gen in GENERATORS:
        subprocess.run([sys.executable, str(CORPUS / "generators" / gen)], cwd=work, env=env,
                       check=True, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, str(CORPUS / "make_big_cases.py")], cwd=work, check=True,
                   stdout=subprocess.DEVNULL)


def read_expected():
    table = {}
    for line in EXPECTED.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        cid, expect, reason = line.split("\t", 2)
        table[cid] = (expect, reason)
    return table


def run_case(binary, work, command, asan, cpu_s=None):
    command = re.sub(r"^memtune\b", lambda _: binary, command)
    env = {k: v for k, v in os.environ.items() if k not in ("TERM", "PYTORCH_CUDA_ALLOC_CONF")}
    env["COLUMNS"] = "100"
    env["M"] = binary
    env["C"] = "cases"
    if asan:
        env["ASAN_OPTIONS"] = f"hard_rss_limit_mb={LIMIT_BYTES >> 20}:detect_leaks=0"
        env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"

    def limit():
        cpu = int(cpu_s or LIMIT_S)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        if not asan:
            resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))

    start = time.monotonic()
    try:
        proc = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True,
                              timeout=WALL_S, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        return None, b"", b"", WALL_S
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start


def problems(expect, code, stdout, stderr):
    if code is None:
        return [f"ran past {WALL_S:g} s of wall time"]
    if code == -signal.SIGXCPU:
        return [f"ran past {LIMIT_S * (3 if expect == 'ok-slow' else 1):g} s of CPU time"]
    if expect == "ok-slow":
        expect = "ok"
    text = stderr.decode("utf-8", "replace")
    output = stdout.decode("utf-8", "replace") + text
    found = []
    if code < 0 or code >= 128:
        found.append(f"killed by a signal (exit {code})")
    if code == 3:
        found.append("internal error (exit 3)")
    if re.search(r"AddressSanitizer|runtime error:|LeakSanitizer|bad_alloc", text):
        found.append("sanitizer or allocation report")
    if found or expect in ("any", "partB"):
        return found
    lines = [ln for ln in text.splitlines() if ln.strip() and ": warning:" not in ln]
    if expect == "ok" and code != 0:
        found.append(f"expected success, got exit {code}")
    elif expect == "error":
        if code not in (1, 2):
            found.append(f"expected a clear error (exit 1 or 2), got exit {code}")
        elif not lines or not re.match(r"^[\w.\-]+( \w+)?: (error: )?", lines[0]):
            found.append("expected one error line naming the program ('memtune: ...')")
    elif expect.startswith("contains ") and expect[9:] not in output:
        found.append(f"expected the output to hold {expect[9:]!r}")
    elif expect.startswith("exit ") and code != int(expect.split()[1]):
        found.append(f"expected {expect}, got exit {code}")
    return found


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if not (CORPUS / "all_cases.tsv").is_file():
        print(f"skipped: no bad-input corpus at {CORPUS}")
        return 0
    binary = str(pathlib.Path(sys.argv[1]).resolve())
    only = re.compile(sys.argv[2]) if len(sys.argv) > 2 else None
    asan = sanitized(binary)
    expected = read_expected()
    failures = []
    with tempfile.TemporaryDirectory(prefix="memtune-bad-") as tmp:
        work = pathlib.Path(tmp)
        write_inputs(work)
        with open(CORPUS / "all_cases.tsv", newline="") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        ran = 0
        for row in rows:
            cid = row["id"]
            if only and not only.search(cid):
                continue
            if cid not in expected:
                failures.append(f"{cid}: no line in {EXPECTED.name}")
                continue
            expect, reason = expected[cid]
            slow = expect == "ok-slow"
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            code, stdout, stderr, seconds = run_case(binary, work, row["command"], asan,
                                                     3 * LIMIT_S if slow else None)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
            ran += 1
            found = problems(expect, code, stdout, stderr)
            if slow and not found and cpu > LIMIT_S:
                print(f"note {cid} (known slow, {reason}): {cpu:.1f} s of CPU, over {LIMIT_S:g} s")
            first = stderr.decode("utf-8", "replace").strip().splitlines()[:1]
            if expect == "partB" and found:
                print(f"note {cid} (part B): {'; '.join(found)}")
            elif found:
                failures.append(f"{cid} [{expect}: {reason}] {'; '.join(found)} "
                                f"({seconds:.1f} s) stderr: {first}\n    {row['command'][:200]}")
        markers = list((work / "markers").iterdir())
        if markers:
            failures.append(f"pickle payloads ran: {[m.name for m in markers]}")
    for f in failures:
        print("FAIL", f)
    print(f"{ran} cases, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
