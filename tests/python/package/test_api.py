"""memtune's Python functions return the CLI's reports: same numbers, same error text."""
import json
import subprocess
import sys

import pytest

import memtune
from conftest import EXAMPLE, ROOT

EXAMPLE_FILE = ROOT / "data/examples" / f"{EXAMPLE}.yaml"
SMALL_JOB = {
    "model": {"preset": "llama3-8b", "tensor_model_parallel_size": 2,
              "pipeline_model_parallel_size": 1, "seq_length": 4096},
    "train": {"micro_batch_size": 1, "global_batch_size": 32},
    "optimizer": {"use_distributed_optimizer": True},
    "ddp": {"use_distributed_optimizer": True},
    "dataset": {"seq_length": 4096},
    "memtune": {"world_size": 8, "gpu": "h100-sxm-80gb"},
}


def test_estimate_of_the_example_equals_the_cli_json(cli_json):
    expected = cli_json(["estimate", "--example", EXAMPLE])
    result = memtune.estimate(example=EXAMPLE)
    assert result.to_dict() == expected
    assert result.peak_bytes == expected["peak"]["allocated_bytes"]
    assert result.verdict in ("fits", "at_risk", "oom")
    assert result.ranks[0].allocated_bytes == expected["ranks"][0]["allocated_bytes"]


def test_a_path_and_a_yaml_string_are_the_same_job(cli_json):
    expected = cli_json(["estimate", str(EXAMPLE_FILE)])
    assert memtune.estimate(str(EXAMPLE_FILE)).to_dict() == expected
    assert memtune.estimate(EXAMPLE_FILE).to_dict() == expected
    from_text = memtune.estimate(EXAMPLE_FILE.read_text()).to_dict()
    assert from_text["peak"] == expected["peak"]
    assert from_text["ranks"] == expected["ranks"]


def test_a_dict_job_equals_the_cli_on_the_same_document(cli_json, tmp_path):
    path = tmp_path / "job.json"
    path.write_text(json.dumps(SMALL_JOB))
    expected = cli_json(["estimate", str(path)])
    result = memtune.estimate(SMALL_JOB)
    assert result.ranks == memtune.Estimate(expected).ranks
    assert result.to_dict()["verdict"] == expected["verdict"]
    print(repr(result))
    assert repr(result).startswith("Estimate(verdict=")


def test_keyword_flags_are_the_cli_flags(cli_json):
    expected = cli_json(["estimate", "--example", EXAMPLE, "--mbs", "2",
                         "--set", "model.recompute_modules=[core_attn,mlp]",
                         "--env", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"])
    result = memtune.estimate(example=EXAMPLE, mbs=2,
                              set={"model.recompute_modules": ["core_attn", "mlp"]},
                              env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    assert result.to_dict() == expected


def test_a_bad_field_raises_job_error_with_the_cli_text(cli):
    bad = dict(SMALL_JOB, mixed_precision="foo")
    with pytest.raises(memtune.JobError) as info:
        memtune.estimate(bad)
    error = info.value
    assert error.field == "mixed_precision"
    assert error.value == "foo"
    assert "bf16_mixed" in error.allowed
    proc = cli(["estimate", "-"], input=json.dumps(bad))  # the document the package sends
    assert proc.returncode == error.exit_code == 2
    assert str(error) == proc.stderr.strip()  # the same line, field path first
    assert str(error).startswith("memtune estimate: error: mixed_precision = 'foo' is not")


def test_an_out_of_range_size_names_field_value_and_range():
    job = json.loads(json.dumps(SMALL_JOB))
    job["model"]["tensor_model_parallel_size"] = 0
    with pytest.raises(memtune.JobError) as info:
        memtune.estimate(job)
    assert info.value.field == "model.tensor_model_parallel_size"
    assert info.value.value == "0"
    assert info.value.allowed == ["1 to 100,000"]
    assert isinstance(info.value, ValueError)


def test_check_findings_do_not_raise(cli_json):
    result = memtune.check(example=EXAMPLE, set={"model.cpu_offloading": True})
    assert not result.ok
    assert result.to_dict() == cli_json(["check", "--example", EXAMPLE,
                                         "--set", "model.cpu_offloading=true"])
    assert "offload.pp" in repr(result)


def test_assess_is_estimate_plus_check():
    result = memtune.assess(example=EXAMPLE)
    assert result.check.errors == 0
    assert result.verdict == memtune.estimate(example=EXAMPLE).verdict
    assert "Assessment(" in repr(result)


def test_job_and_plan(cli_json):
    assert memtune.job(example=EXAMPLE).job.model.tensor_model_parallel_size == 4
    plan = memtune.plan(example=EXAMPLE, limit=2)
    assert plan.to_dict() == cli_json(["plan", "--example", EXAMPLE, "--limit", "2"])
    assert plan.candidates[0].rank == 1


def test_catalogs(cli_json):
    names = [m.name for m in memtune.models()]
    assert "llama3-70b" in names
    expected = cli_json(["models", "llama3-70b"])["models"][0]
    assert memtune.models("llama3-70b").to_dict() == expected
    h100 = memtune.gpus("h100-sxm-80gb")
    assert h100.to_dict() == cli_json(["gpus", "h100-sxm-80gb"])["gpus"][0]
    assert len(memtune.gpus()) > 3


def test_snapshot_and_trace_commands(cli_json, root):
    snapshot = root / "tests/data/snapshots/oom_native.pickle"
    assert memtune.inspect(snapshot).to_dict() == cli_json(["inspect", str(snapshot)])
    assert (memtune.replay(snapshot, alloc_conf="expandable_segments:True").to_dict() ==
            cli_json(["replay", str(snapshot), "--alloc-conf", "expandable_segments:True"]))
    trace = root / "tests/data/traces/section49_example1.trace"
    assert (memtune.simulate(trace, capacity="80GiB").to_dict() ==
            cli_json(["simulate", str(trace), "--capacity", "80GiB"]))


def test_diagnose_text_and_file(cli_json, root):
    log = root / "tests/golden/diagnose/inputs/oom_2.9.txt"
    assert memtune.diagnose(log).to_dict() == cli_json(["diagnose", str(log)])
    from_text = memtune.diagnose(text=log.read_text())
    assert from_text.cause == memtune.diagnose(log).cause


def test_validate(cli_json, root):
    cases = root / "tests/data/measured-bridge-skills.jsonl"
    assert memtune.validate(cases).to_dict() == cli_json(["validate", str(cases)])


def test_lint_runs_the_cli_command(cli):
    if cli(["lint", "--help"]).returncode != 0:
        pytest.skip("this memtune has no lint command yet")
    assert isinstance(memtune.lint(str(ROOT / "data/examples" / f"{EXAMPLE}.yaml")),
                      memtune.Lint)


def test_usage_errors_raise_memtune_error():
    with pytest.raises(memtune.MemtuneError) as info:
        memtune.estimate(example=EXAMPLE, no_such_flag=True)
    assert "--no-such-flag" in str(info.value)
    with pytest.raises(TypeError):
        memtune.estimate(object())


def test_docstrings_have_examples():
    for name in ("assess", "estimate", "check", "plan", "validate", "diagnose", "lint",
                 "inspect", "replay", "simulate", "models", "gpus"):
        doc = getattr(memtune, name).__doc__
        assert doc and "Example:" in doc and ">>>" in doc, name
    import pydoc
    assert "Example:" in pydoc.render_doc(memtune.assess)


def test_python_dash_m_is_the_cli(cli):
    for args in (["--help"], ["units", "80GiB"], ["gpus", "nope"]):
        proc = subprocess.run([sys.executable, "-m", "memtune"] + args, capture_output=True,
                              text=True)
        expected = cli(args)
        assert (proc.returncode, proc.stdout, proc.stderr) == (
            expected.returncode, expected.stdout, expected.stderr)


def test_run_cli():
    code, out, err = memtune.run_cli(["units", "80GiB"])
    assert code == 0 and "GB" in out and err == ""
