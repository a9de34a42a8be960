#!/usr/bin/env python3
"""Dry run of the calibration harness (tools/calibrate): every workload built and stepped on
the CPU with tiny shapes, its cases checked against the validation-case format and, when the
binary has the command, against memtune's job parser.

    python3 test_calibrate_dry.py MEMTUNE_BINARY
"""
import json
import os
import pathlib
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = pathlib.Path(os.environ.get("MEMTUNE_SOURCE_DIR",
                                   pathlib.Path(__file__).resolve().parents[2]))
HARNESS = ROOT / "tools" / "calibrate"
sys.path.insert(0, str(HARNESS))

import job_writer  # noqa: E402
import layout  # noqa: E402
import schedule  # noqa: E402
import workloads  # noqa: E402

BINARY = None
METRICS = {"max_allocated", "max_reserved", "device_used", "peak_active"}
RANKS = {"max", "rank0", "last"}


def has_torch():
    try:
        import torch
    except ImportError:
        return False
    return torch.__version__ is not None


def memtune_has(command):
    if BINARY is None:
        return False
    proc = subprocess.run([BINARY, command, "--help"], capture_output=True)
    return proc.returncode == 0


class ScheduleTest(unittest.TestCase):
    def test_in_flight_counts_match_megatron(self):
        # megatron.md section 4: non-interleaved min(p - r, m); interleaved
        # min(2(p - r - 1) + (v - 1) p + 1, m v); p=4 v=5 m=4 holds 20 chunks.
        self.assertEqual(schedule.peak_in_flight(schedule.rank_steps(4, 0, 8)), 4)
        self.assertEqual(schedule.peak_in_flight(schedule.rank_steps(4, 3, 8)), 1)
        self.assertEqual(schedule.peak_in_flight(schedule.rank_steps(4, 1, 2)), 2)
        self.assertEqual(schedule.peak_in_flight(schedule.rank_steps(4, 0, 8, 2)), 11)
        self.assertEqual(schedule.peak_in_flight(schedule.rank_steps(4, 0, 4, 5)), 20)
        self.assertEqual(schedule.peak_in_flight(schedule.rank_steps(1, 0, 4)), 1)

    def test_every_forward_has_one_backward_after_it(self):
        steps = schedule.rank_steps(4, 1, 8, 2)
        done = set()
        for step in steps:
            key = (step.microbatch, step.chunk)
            if step.kind == "F":
                done.add(key)
            else:
                self.assertIn(key, done)
                done.remove(key)
        self.assertEqual(done, set())
        self.assertEqual(len(steps), 2 * 8 * 2)


class LayoutTest(unittest.TestCase):
    def test_dist_opt_pads_params_and_bucket(self):
        lay = layout.buffer_layout([100, 10], dist_opt=True, dp=3, bucket_size=None)
        # reverse order: param 1 at 0..10, param 0 at 64..164; end padded to lcm(3,128)=384
        self.assertEqual(lay.param_ranges, [(64, 164), (0, 10)])
        self.assertEqual(lay.numel, 384)
        pieces = layout.shard_pieces(lay, 3, 0)
        self.assertEqual(pieces, [(0, 64, 128), (1, 0, 10)])

    def test_plain_ddp_has_no_padding(self):
        lay = layout.buffer_layout([100, 10], dist_opt=False, dp=8, bucket_size=None)
        self.assertEqual(lay.numel, 110)


class JobWriterTest(unittest.TestCase):
    def test_job_records_mode_and_rank_layout(self):
        wl = workloads.dry_workload(workloads.by_name("pp4-vpp2-first")[0])
        job = job_writer.job_document(wl, "expandable", 1 << 30)
        self.assertEqual(job["memtune"]["env"], {"PYTORCH_CUDA_ALLOC_CONF":
                                                 "expandable_segments:True"})
        self.assertEqual(job["model"]["num_layers"], wl.layers_per_chunk * 2 * 4)
        self.assertNotIn("env", job_writer.job_document(wl, "native", 1 << 30)["memtune"])

    def test_unknown_workload_is_named(self):
        with self.assertRaisesRegex(KeyError, "unknown workload 'nope'"):
            workloads.by_name("nope")

    def test_matrix_spans_the_required_axes(self):
        wls = workloads.matrix()
        self.assertGreaterEqual(len([w for w in wls if not w.fragmenting]), 12)
        self.assertGreaterEqual(len([w for w in wls if w.fragmenting]), 2)
        for axis in ("hidden", "seq", "mbs", "recompute", "pp", "vpp", "dist_opt", "tp"):
            self.assertGreater(len({getattr(w, axis) for w in wls}), 1, axis)


class SnapshotShrinkTest(unittest.TestCase):
    def test_big_snapshot_loses_frames_then_old_entries(self):
        if not has_torch():
            self.skipTest("no PyTorch")
        import memory
        rng = random.Random(7)
        trace = [{"action": "alloc", "addr": i * 512, "size": rng.randrange(1 << 30),
                  "frames": [{"name": f"f{rng.random()}", "filename": f"{rng.random()}.py",
                              "line": rng.randrange(9999)} for _ in range(4)]}
                 for i in range(4000)]
        snap = {"segments": [], "device_traces": [trace]}
        data, note = memory.shrink_snapshot(snap, limit=20_000)
        self.assertLessEqual(len(data), 20_000)
        self.assertIn("stack frames removed", note)
        self.assertLess(len(snap["device_traces"][0]), 4000)
        self.assertEqual(snap["device_traces"][0][-1]["addr"], 3999 * 512)


class DryRunTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.out = pathlib.Path(tempfile.mkdtemp(prefix="calib-dry-"))
        if not has_torch():
            return
        cls.proc = subprocess.run([sys.executable, str(HARNESS / "run.py"), "--dry-run",
                                   "--out", str(cls.out)], capture_output=True, text=True,
                                  timeout=600)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.out, ignore_errors=True)

    def setUp(self):
        if not has_torch():
            self.skipTest("no PyTorch for " + sys.executable)

    def cases(self):
        return [json.loads(line) for line in (self.out / "cases.jsonl").read_text().splitlines()]

    def test_runs_every_workload_in_both_modes(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stdout + self.proc.stderr)
        n = len(workloads.matrix())
        self.assertEqual(len(self.cases()), n * 2 * 3)
        summary = json.loads((self.out / "summary.json").read_text())
        self.assertEqual([r["status"] for r in summary["runs"]], ["ok"] * (2 * n))
        env = json.loads((self.out / "environment.json").read_text())
        for key in ("torch", "cuda", "python", "driver"):
            self.assertIn(key, env)

    def test_cases_follow_the_case_format(self):
        ids = set()
        for case in self.cases():
            self.assertEqual(set(case), {"id", "source", "job", "measured", "assumptions",
                                         "quality"})
            self.assertNotIn(case["id"], ids)
            ids.add(case["id"])
            self.assertIn(case["measured"]["metric"], METRICS)
            self.assertIn(case["measured"]["rank"], RANKS)
            self.assertIsInstance(case["measured"]["bytes"], int)
            self.assertGreater(case["measured"]["bytes"], 0)
            self.assertTrue(case["assumptions"][0].startswith("DRY RUN"))
            self.assertTrue(any(a.startswith("APPROX:") for a in case["assumptions"]))
            mode = case["id"].split("-")[-2]
            env = case["job"]["memtune"].get("env", {})
            self.assertEqual(env.get("PYTORCH_CUDA_ALLOC_CONF"), job_writer.ALLOC_CONF[mode])

    def test_cpu_peak_matches_the_harness_byte_count(self):
        # The workloads must allocate what the harness says they hold (state + in-flight
        # activations + transients); the CPU allocator peak checks it without a GPU.
        for path in sorted((self.out / "results").glob("*.native.json")):
            result = json.loads(path.read_text())
            ratio = result["max_allocated"] / result["expected"]["total"]
            self.assertGreater(ratio, 0.85, path.name)
            self.assertLess(ratio, 1.2, path.name)

    def test_memtune_accepts_the_jobs(self):
        if not memtune_has("job"):
            print("note: this memtune has no 'job' command; job documents not parsed")
            return
        for path in sorted((self.out / "jobs").glob("*.json")):
            proc = subprocess.run([BINARY, "job", str(path)], capture_output=True, text=True)
            self.assertEqual(proc.returncode, 0, f"{path.name}: {proc.stderr}")

    def test_memtune_validates_the_cases(self):
        if not memtune_has("validate"):
            print("note: this memtune has no 'validate' command; cases not validated")
            return
        proc = subprocess.run([BINARY, "validate", str(self.out / "cases.jsonl")],
                              capture_output=True, text=True)
        self.assertIn(proc.returncode, (0, 1), proc.stderr)


class CliTest(unittest.TestCase):
    def test_calibrate_dry_run_one_workload(self):
        if BINARY is None or not has_torch():
            self.skipTest("needs the memtune binary and PyTorch")
        out = pathlib.Path(tempfile.mkdtemp(prefix="calib-cli-"))
        try:
            proc = subprocess.run([BINARY, "calibrate", "--dry-run", "--only", "pp4-last-1f1b",
                                   "--out", str(out), "--python", sys.executable,
                                   "--harness", str(HARNESS)],
                                  capture_output=True, text=True, timeout=300)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            self.assertIn("6 cases written", proc.stdout)
            self.assertIn("== memtune validate", proc.stdout)
            self.assertEqual(len((out / "cases.jsonl").read_text().splitlines()), 6)
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_calibrate_unknown_workload(self):
        if BINARY is None or not has_torch():
            self.skipTest("needs the memtune binary and PyTorch")
        proc = subprocess.run([BINARY, "calibrate", "--dry-run", "--only", "nope", "--out",
                               tempfile.gettempdir() + "/calib-nope", "--python",
                               sys.executable, "--harness", str(HARNESS)],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("--only: unknown workload 'nope'", proc.stderr)

    def test_calibrate_falls_back_to_debian_python(self):
        # Without --python, a python3 on PATH that cannot answer the probe (here: a stub
        # that fails) is skipped for Debian's /usr/bin/python3 when that one has PyTorch.
        debian = "/usr/bin/python3"
        if BINARY is None or not os.path.exists(debian) or subprocess.run(
                [debian, "-c", "import torch"], capture_output=True).returncode != 0:
            self.skipTest("needs the memtune binary and PyTorch under /usr/bin/python3")
        stub_dir = pathlib.Path(tempfile.mkdtemp(prefix="calib-stub-"))
        try:
            stub = stub_dir / "python3"
            stub.write_text("#!/bin/sh\nexit 1\n")
            stub.chmod(0o755)
            env = dict(os.environ, PATH=str(stub_dir) + os.pathsep + os.environ.get("PATH", ""))
            proc = subprocess.run([BINARY, "calibrate", "--dry-run", "--only", "nope", "--out",
                                   str(stub_dir / "out"), "--harness", str(HARNESS)],
                                  capture_output=True, text=True, timeout=120, env=env)
            # The probe reached the harness through /usr/bin/python3: the error is the
            # harness's own, not "PyTorch is not installed for 'python3'".
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertIn("--only: unknown workload 'nope'", proc.stderr)
        finally:
            shutil.rmtree(stub_dir, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
