#!/usr/bin/env python3
"""Turn Megatron-LM CI validation cases into their first-iteration readings.

make_cases.py keeps each run's largest mem-max-allocated-bytes (the whole run's peak) and
notes in `assumptions` what the first logged step read. When that step is iteration 1, this
writes the case again with the step-1 value, `measured.after_iterations: 1` and the id suffix
"-step1": the peak through the first iteration, before Adam's moments exist, which
`memtune validate` then predicts from the trace (docs/synth.md, "Peaks through each
iteration"). Runs whose log starts later are left out.

usage: first_step_cases.py CASES.jsonl > STEP1.jsonl
"""
import json
import re
import sys

STEP = re.compile(r"steps logged: (\d+)\.\.\d+; step \d+ \(first iteration, before the optimizer "
                  r"state exists\) read (\d+) bytes")


def first_step_cases(lines):
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        case = json.loads(line)
        for note in case.get("assumptions", []):
            m = STEP.match(note)
            if m and m.group(1) == "1":
                case["id"] += "-step1"
                case["measured"]["bytes"] = int(m.group(2))
                case["measured"]["after_iterations"] = 1
                case["assumptions"] = [
                    "mem-max-allocated-bytes of step 1 (the peak through the first iteration's "
                    "optimizer step)"] + case["assumptions"]
                yield case
                break


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        for c in first_step_cases(f):
            print(json.dumps(c))
