"""memtune.torch: imports without torch; records, dumps per rank and on OOM (fake torch on
CPU; the real CUDA path only where a GPU is present)."""
import pickle
import subprocess
import sys
import types

import pytest

import memtune
import memtune.torch as mt


def test_imports_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import memtune.torch as mt\n"
            "print(mt.snapshot_path('d', oom=True))\n"
            "try:\n    mt.dump()\nexcept ImportError as e:\n    print('ImportError', e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "d/snapshot_oom_rank-0.pickle" in proc.stdout
    assert "ImportError memtune.torch needs PyTorch" in proc.stdout


def test_rank_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("RANK", "3")
    assert mt.snapshot_path("out").name == "snapshot_rank-3.pickle"
    assert mt.snapshot_path("out", oom=True).name == "snapshot_oom_rank-3.pickle"


class FakeTorch:
    """The torch calls memtune.torch makes, PyTorch 2.1+'s signatures, recorded."""

    class OutOfMemoryError(RuntimeError):
        pass

    def __init__(self, observer_hook=True):
        self.calls = []
        self.observers = []
        fake = self

        def _record_memory_history(enabled="all", context="all", stacks="all",
                                   max_entries=sys.maxsize, device=None):
            fake.calls.append(("record", enabled, stacks, max_entries))

        def _dump_snapshot(filename):
            fake.calls.append(("dump", filename))
            with open(filename, "wb") as f:
                pickle.dump({"segments": [], "device_traces": [[]]}, f)

        self.cuda = types.SimpleNamespace(
            is_available=lambda: True,
            memory=types.SimpleNamespace(_record_memory_history=_record_memory_history,
                                         _dump_snapshot=_dump_snapshot))
        self.distributed = types.SimpleNamespace(is_available=lambda: False)
        self._C = types.SimpleNamespace()
        if observer_hook:
            self._C._cuda_attach_out_of_memory_observer = self.observers.append


@pytest.fixture
def fake(monkeypatch):
    torch = FakeTorch()
    monkeypatch.setattr(mt, "_torch", lambda: torch)
    monkeypatch.setenv("RANK", "1")
    return torch


def test_record_uses_python_stacks_and_bounded_entries_and_dumps(fake, tmp_path):
    with mt.record(tmp_path) as rec:
        pass
    assert fake.calls[0] == ("record", "all", "python", mt.DEFAULT_MAX_ENTRIES)
    assert rec.path == tmp_path / "snapshot_rank-1.pickle" and rec.path.exists()
    assert fake.calls[-1] == ("record", None, "all", sys.maxsize)  # history off again


def test_an_oom_is_dumped_and_never_swallowed(fake, tmp_path):
    with pytest.raises(FakeTorch.OutOfMemoryError):
        with mt.record(tmp_path) as rec:
            fake.observers[0](0, 1 << 30, 0, 0)  # the allocator calls the observer first
            raise FakeTorch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB")
    assert rec.oom_path == tmp_path / "snapshot_oom_rank-1.pickle"
    assert rec.oom_path.exists()
    assert [c for c in fake.calls if c[0] == "dump"] == [("dump", str(rec.oom_path))]


def test_without_an_observer_hook_the_exception_path_dumps(monkeypatch, tmp_path):
    torch = FakeTorch(observer_hook=False)
    monkeypatch.setattr(mt, "_torch", lambda: torch)
    with pytest.raises(RuntimeError):
        with mt.record(tmp_path) as rec:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")  # torch 1.x
    assert rec.oom_path.exists()


def test_other_errors_still_dump_the_snapshot(fake, tmp_path):
    with pytest.raises(KeyError):
        with mt.record(tmp_path) as rec:
            raise KeyError("x")
    assert rec.path.exists() and rec.oom_path is None


def test_the_installed_torch_is_handled_on_cpu():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: test_records_on_a_gpu covers it")
    with pytest.raises(RuntimeError, match="needs a CUDA device"):
        with mt.record():
            pass


def test_inspect_and_replay_read_what_pytorch_writes(root):
    snapshot = root / "tests/data/snapshots/oom_native.pickle"  # a PyTorch-format snapshot
    assert memtune.inspect(snapshot).to_dict()["schema"] == "memtune.inspect/1"
    assert memtune.replay(snapshot).to_dict()["schema"] == "memtune.replay/1"


def test_records_on_a_gpu(tmp_path):  # GPU only
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    with mt.record(tmp_path) as rec:
        x = torch.empty(1 << 20, device="cuda")
        del x
    assert memtune.inspect(rec.path).to_dict()["schema"] == "memtune.inspect/1"
