#!/usr/bin/python3
"""Writes small, hand-checkable PyTorch memory snapshot pickles for memtune's tests.

Each file has exactly the structure torch.cuda.memory._dump_snapshot() writes (a dict with
"segments", "device_traces", "allocator_settings", "external_annotations"; see
docs/allocator.md section 8), pickled with Python's standard `pickle` (default protocol 4,
plus one protocol-2 and one gzip'd copy). The events and final states were worked out by
hand from the allocator rules in docs/allocator.md (sections 3, 4.9); each case below says
what it shows. No GPU and no torch are needed; the files are committed.

    /usr/bin/python3 tests/data/snapshots/make_snapshots.py   # rewrites the files here
"""
import gzip
import os
import pickle

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))

# Addresses (cudaMalloc results and expandable VA bases) chosen to look like real ones.
SMALL_SEG = 0x7F0000000000
LARGE_SEG = [0x7F0200000000, 0x7F0400000000, 0x7F0600000000]
EXP_SMALL = 0x7D0000000000
EXP_LARGE = 0x7E0000000000
T0_US = 1_700_000_000_000_000

# Stack frames, innermost first. The same objects are reused, so pickle memoizes them
# (BINGET), as in real snapshots.
F_TRAIN = {"name": "train_step", "filename": "/work/train.py", "line": 40}
F_FWD = {"name": "forward", "filename": "/work/model.py", "line": 12}
F_ATTN = {"name": "attention", "filename": "/work/model.py", "line": 31}
F_OPT = {"name": "step", "filename": "/work/optim.py", "line": 7}
STACK_FWD = [F_FWD, F_TRAIN]
STACK_ATTN = [F_ATTN, F_FWD, F_TRAIN]
STACK_OPT = [F_OPT, F_TRAIN]


class Trace:
    """Builds one device trace with PyTorch's entry layout (allocator.md 8.5, ~2.6+)."""

    def __init__(self):
        self.entries = []

    def add(self, action, addr, size, frames=None):
        key = "device_free" if action == "oom" else "addr"
        entry = {"action": action, key: addr, "size": size, "stream": 0,
                 "time_us": T0_US + 10 * len(self.entries),
                 "compile_context": "N/A", "user_metadata": ""}
        if frames is not None:
            entry["frames"] = frames
        self.entries.append(entry)

    def alloc(self, addr, size, frames):
        self.add("alloc", addr, size, frames)

    def free(self, addr, size, frames):
        self.add("free_requested", addr, size, frames)
        self.add("free_completed", addr, size, frames)


def block(addr, size, requested, state, frames=None):
    allocated = state != "inactive"
    return {"address": addr, "size": size, "requested_size": requested, "state": state,
            "frames": frames if (allocated and frames is not None) else []}


def segment(addr, blocks, kind="large", expandable=False, frames=None):
    total = sum(b["size"] for b in blocks)
    allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    active = sum(b["size"] for b in blocks if b["state"] != "inactive")
    requested = sum(b["requested_size"] for b in blocks if b["state"] != "inactive")
    assert addr == blocks[0]["address"]
    return {"device": 0, "address": addr, "total_size": total, "allocated_size": allocated,
            "active_size": active, "requested_size": requested, "stream": 0,
            "segment_type": kind, "segment_pool_id": (0, 0), "is_expandable": expandable,
            "frames": frames or [], "blocks": blocks}


def settings(conf, expandable):
    return {"PYTORCH_CUDA_ALLOC_CONF": conf, "max_split_size": -1,
            "garbage_collection_threshold": 0.0, "expandable_segments": expandable,
            "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False,
            "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)}}


def snapshot(segments, trace, conf="", expandable=False):
    return {"segments": segments, "device_traces": [trace.entries],
            "allocator_settings": settings(conf, expandable), "external_annotations": []}


def example1_native():
    """allocator.md 4.9 example 1, native: a=100 MiB; free(a); b=60 MiB; c=100 MiB.
    b reuses a's segment (split 60 + 40 free); c needs a second segment. Reserved 200 MiB,
    allocated 160 MiB, inactive split 40 MiB (requested_size of the rest stays 100 MiB)."""
    s1, s2 = LARGE_SEG[0], LARGE_SEG[1]
    t = Trace()
    t.add("segment_alloc", s1, 100 * MiB, STACK_FWD)
    t.alloc(s1, 100 * MiB, STACK_FWD)
    t.free(s1, 100 * MiB, STACK_FWD)
    t.alloc(s1, 60 * MiB, STACK_ATTN)
    t.add("segment_alloc", s2, 100 * MiB, STACK_OPT)
    t.alloc(s2, 100 * MiB, STACK_OPT)
    segs = [segment(s1, [block(s1, 60 * MiB, 60 * MiB, "active_allocated", STACK_ATTN),
                         block(s1 + 60 * MiB, 40 * MiB, 100 * MiB, "inactive")], frames=STACK_FWD),
            segment(s2, [block(s2, 100 * MiB, 100 * MiB, "active_allocated", STACK_OPT)],
                    frames=STACK_OPT)]
    return snapshot(segs, t)


def example1_expandable():
    """Example 1 with expandable_segments:True (page 20 MiB): a maps 100 MiB; b splits it;
    c grows the free 40 MiB tail by 60 MiB (one segment_map), so reserved is 160 MiB."""
    e = EXP_LARGE
    t = Trace()
    t.add("segment_map", e, 100 * MiB, STACK_FWD)
    t.alloc(e, 100 * MiB, STACK_FWD)
    t.free(e, 100 * MiB, STACK_FWD)
    t.alloc(e, 60 * MiB, STACK_ATTN)
    t.add("segment_map", e + 100 * MiB, 60 * MiB, STACK_OPT)
    t.alloc(e + 60 * MiB, 100 * MiB, STACK_OPT)
    segs = [segment(e, [block(e, 60 * MiB, 60 * MiB, "active_allocated", STACK_ATTN),
                        block(e + 60 * MiB, 100 * MiB, 100 * MiB, "active_allocated", STACK_OPT)],
                    expandable=True)]
    return snapshot(segs, t, "expandable_segments:True", True)


B_REQ = 30 * MiB + 1          # 31,457,281 B requested
B_SIZE = 30 * MiB + 512       # rounded to 512: 31,457,792 B


def example2_events_native():
    """x=1000 B; A=5 MiB; B=30 MiB+1; free(A); C=18 MiB (native)."""
    small, s1, s2 = SMALL_SEG, LARGE_SEG[0], LARGE_SEG[1]
    t = Trace()
    t.add("segment_alloc", small, 2 * MiB, STACK_FWD)
    t.alloc(small, 1000, STACK_FWD)
    t.add("segment_alloc", s1, 20 * MiB, STACK_ATTN)
    t.alloc(s1, 5 * MiB, STACK_ATTN)
    t.add("segment_alloc", s2, 32 * MiB, STACK_FWD)
    t.alloc(s2, B_REQ, STACK_FWD)
    t.free(s1, 5 * MiB, STACK_ATTN)
    t.alloc(s1, 18 * MiB, STACK_OPT)
    return t


def example2_segments_native():
    small, s1, s2 = SMALL_SEG, LARGE_SEG[0], LARGE_SEG[1]
    return [
        segment(small, [block(small, 1024, 1000, "active_allocated", STACK_FWD),
                        block(small + 1024, 2 * MiB - 1024, 0, "inactive")], kind="small",
                frames=STACK_FWD),
        segment(s1, [block(s1, 18 * MiB, 18 * MiB, "active_allocated", STACK_OPT),
                     block(s1 + 18 * MiB, 2 * MiB, 5 * MiB, "inactive")], frames=STACK_ATTN),
        segment(s2, [block(s2, B_SIZE, B_REQ, "active_allocated", STACK_FWD),
                     block(s2 + B_SIZE, 2 * MiB - 512, 0, "inactive")], frames=STACK_FWD),
    ]


def example2_native():
    """allocator.md 4.9 example 2, native: reserved 2 + 20 + 32 = 54 MiB; C reuses A's
    20 MiB segment once A is freed."""
    return snapshot(example2_segments_native(), example2_events_native())


def example2_expandable():
    """Example 2, expandable: B extends A's free rest by one page; free(A) leaves 5 MiB that
    cannot merge; C grows the tail by one more page. Reserved 2 + 60 = 62 MiB."""
    es, el = EXP_SMALL, EXP_LARGE
    b_rest = 5 * MiB + B_SIZE                 # 36,700,672: free rest after B
    c_rest = b_rest + 18 * MiB                # 55,575,040: free rest after C
    t = Trace()
    t.add("segment_map", es, 2 * MiB, STACK_FWD)
    t.alloc(es, 1000, STACK_FWD)
    t.add("segment_map", el, 20 * MiB, STACK_ATTN)
    t.alloc(el, 5 * MiB, STACK_ATTN)
    t.add("segment_map", el + 20 * MiB, 20 * MiB, STACK_FWD)
    t.alloc(el + 5 * MiB, B_REQ, STACK_FWD)
    t.free(el, 5 * MiB, STACK_ATTN)
    t.add("segment_map", el + 40 * MiB, 20 * MiB, STACK_OPT)
    t.alloc(el + b_rest, 18 * MiB, STACK_OPT)
    segs = [
        segment(es, [block(es, 1024, 1000, "active_allocated", STACK_FWD),
                     block(es + 1024, 2 * MiB - 1024, 0, "inactive")], kind="small",
                expandable=True),
        segment(el, [block(el, 5 * MiB, 5 * MiB, "inactive"),
                     block(el + 5 * MiB, B_SIZE, B_REQ, "active_allocated", STACK_FWD),
                     block(el + b_rest, 18 * MiB, 18 * MiB, "active_allocated", STACK_OPT),
                     block(el + c_rest, 60 * MiB - c_rest, 0, "inactive")], expandable=True),
    ]
    return snapshot(segs, t, "expandable_segments:True", True)


def midrun_native():
    """Example 2 native recorded with max_entries=4: the ring buffer kept only the last four
    entries (free(A) and C's alloc, preceded by B's alloc), so x, A and the three segments
    predate the trace and must be rebuilt from the final state (allocator.md 10.3)."""
    t = example2_events_native()
    t.entries = t.entries[-4:]
    return snapshot(example2_segments_native(), t)


def oom_native():
    """Big-block splitting ending in OOM on a 1000 MiB-free device (allocator.md 9, case 2):
    a=400 MiB; free(a); s=50 MiB splits a's segment; b=400 MiB needs a second segment;
    c=380 MiB fits in neither, cudaMalloc fails with 200 MiB free, empty_cache frees nothing
    (both segments hold a live block): OOM with 350 MiB reserved but unallocated. With
    expandable segments the same requests peak at 840 MiB reserved and fit."""
    s1, s2 = LARGE_SEG[0], LARGE_SEG[1]
    t = Trace()
    t.add("segment_alloc", s1, 400 * MiB, STACK_FWD)
    t.alloc(s1, 400 * MiB, STACK_FWD)
    t.free(s1, 400 * MiB, STACK_FWD)
    t.alloc(s1, 50 * MiB, STACK_ATTN)
    t.add("segment_alloc", s2, 400 * MiB, STACK_OPT)
    t.alloc(s2, 400 * MiB, STACK_OPT)
    t.add("oom", 200 * MiB, 380 * MiB, STACK_FWD)
    segs = [segment(s1, [block(s1, 50 * MiB, 50 * MiB, "active_allocated", STACK_ATTN),
                         block(s1 + 50 * MiB, 350 * MiB, 400 * MiB, "inactive")], frames=STACK_FWD),
            segment(s2, [block(s2, 400 * MiB, 400 * MiB, "active_allocated", STACK_OPT)],
                    frames=STACK_OPT)]
    return snapshot(segs, t)


def oom_capacity():
    """A genuine capacity OOM on a 1000 MiB-free device: a=400 MiB and b=400 MiB stay live, c=380
    MiB needs a third segment, cudaMalloc fails with 200 MiB free and nothing is cached (0 bytes
    reserved but unallocated). With expandable segments the same requests need 1180 MiB: still
    an OOM. The failing request comes from the optimizer step (STACK_OPT)."""
    s1, s2 = LARGE_SEG[0], LARGE_SEG[1]
    t = Trace()
    t.add("segment_alloc", s1, 400 * MiB, STACK_FWD)
    t.alloc(s1, 400 * MiB, STACK_FWD)
    t.add("segment_alloc", s2, 400 * MiB, STACK_FWD)
    t.alloc(s2, 400 * MiB, STACK_FWD)
    t.add("oom", 200 * MiB, 380 * MiB, STACK_OPT)
    segs = [segment(s1, [block(s1, 400 * MiB, 400 * MiB, "active_allocated", STACK_FWD)],
                    frames=STACK_FWD),
            segment(s2, [block(s2, 400 * MiB, 400 * MiB, "active_allocated", STACK_FWD)],
                    frames=STACK_FWD)]
    return snapshot(segs, t)


def diverges():
    """Example 1 native, but the settings claim expandable_segments:True: a replay under the
    recorded settings maps pages where the recording shows cudaMalloc, so it must report a
    divergence at entry 0."""
    snap = example1_native()
    snap["allocator_settings"] = settings("expandable_segments:True", True)
    return snap


def legacy_segments():
    """PyTorch <= 1.13 torch.cuda.memory_snapshot(): a bare list of segments whose blocks have
    no "address" and record allocations in "history" [{addr, real_size, frames}]."""
    segs = []
    for seg in example2_segments_native():
        legacy = {k: seg[k] for k in ("device", "address", "total_size", "allocated_size",
                                      "active_size", "stream", "segment_type")}
        legacy["blocks"] = []
        for b in seg["blocks"]:
            lb = {"size": b["size"], "state": b["state"]}
            if b["state"] == "active_allocated":
                lb["history"] = [{"addr": b["address"], "real_size": b["requested_size"],
                                  "frames": b["frames"]}]
            legacy["blocks"].append(lb)
        segs.append(legacy)
    return segs


def shared_trace():
    """Hostile: one trace entry dict referenced 5,000 times from one trace list, and that
    list referenced 64 times (pickle memo): 320,000 entries from a file of a few KB."""
    entry = {"action": "alloc", "addr": LARGE_SEG[0], "size": MiB, "stream": 0,
             "time_us": T0_US, "frames": STACK_FWD}
    trace = [entry] * 5000
    return {"segments": [], "device_traces": [trace] * 64}


def duplicate_segment():
    """Hostile: example1_native with its first segment listed twice."""
    snap = example1_native()
    snap["segments"] = [snap["segments"][0]] + snap["segments"]
    return snap


def write(name, data, protocol=4, compress=False):
    raw = pickle.dumps(data, protocol=protocol)
    path = os.path.join(HERE, name)
    with open(path, "wb") as f:
        f.write(gzip.compress(raw, mtime=0) if compress else raw)


def main():
    write("example1_native.pickle", example1_native())
    write("example1_expandable.pickle", example1_expandable())
    write("example2_native.pickle", example2_native())
    write("example2_expandable.pickle", example2_expandable())
    write("midrun_native.pickle", midrun_native())
    write("oom_native.pickle", oom_native())
    write("oom_capacity.pickle", oom_capacity())
    write("legacy_segments.pickle", legacy_segments())
    write("diverges.pickle", diverges())
    write("example2_native_protocol2.pickle", example2_native(), protocol=2)
    write("example1_native.pickle.gz", example1_native(), compress=True)
    write("shared_trace.pickle", shared_trace())
    write("duplicate_segment.pickle", duplicate_segment())


if __name__ == "__main__":
    main()
