#!/usr/bin/env python3
"""Annotate the public validation cases with the memory report each number was read from.

`tests/data/measured-public.jsonl` is an unmodified copy of the shared cases: a
`max_allocated` there is read as the whole run's peak. Two of its sources say otherwise,
and this writes the cases again with `measured.after_iterations` (docs/validation.md,
"Which iteration the published numbers are"):

- The Megatron-Bridge Llama3-70B study (PR #3107, data committed 2026-04-02 in 0026ec187)
  quotes "peak memory" from the Bridge memory report. At that commit Bridge printed the
  report once, after the first logged iteration (training/utils/train_utils.py,
  `report_memory_flag = False` after the first report), and the perf scripts log every
  iteration (scripts/performance/utils/overrides.py: `log_interval = 1`): the line is
  "(after 1 iterations) memory". Bridge issue #3165 (2026-04-05) and PR #3169 (2026-04-09,
  "report memory on 2nd iteration to better reflect actual peak") changed this a week later
  because Adam's state is created at the first step. The baseline also "OOMed on rank 0"
  after reporting 58.8 GB (PR #3107: "flaky OOMing ~30-60% of runs").
- The Llama-3.2-1B log quotes "[Rank 0] (after 10 iterations) memory (MB)".

Every other case is copied unchanged. usage: annotate_reports.py IN.jsonl > OUT.jsonl
"""
import json
import sys

BRIDGE_STUDY = ("measured.after_iterations 1: Bridge at the study's commit (0026ec187) printed its memory "
                "report once, after the first logged iteration, and the perf scripts set log_interval 1 "
                "(Bridge #3165, PR #3169 added the second-iteration report on 2026-04-09)")
LOG_1B = "measured.after_iterations 10: the quoted line is '[Rank 0] (after 10 iterations) memory (MB)'"


def annotate(case):
    m = case["measured"]
    if case["id"].startswith("mb-skill-llama3-70b-sft-fp8-") and m["metric"] == "max_allocated":
        m["after_iterations"] = 1
        case["assumptions"] = [BRIDGE_STUDY] + case.get("assumptions", [])
    elif case["id"] == "mbridge-log-llama32-1b-8xh100":
        m["after_iterations"] = 10
        case["assumptions"] = [LOG_1B] + case.get("assumptions", [])
    return case


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        for line in f:
            if line.strip():
                print(json.dumps(annotate(json.loads(line))))
