"""Accuracy on measured runs must not regress (docs/validation.md).

tests/data/measured-megatron-ci.jsonl holds 88 Megatron-LM functional tests measured on
DGX-H100 (tools/megatron_ci/make_cases.py). This checks the accurate mode's summary against
floors well above today's figures (88 of 88 predicted, median 1.1%, 79 of 88 within 5%), so that a modelling
change which loses accuracy on real runs fails here, while honest small shifts do not.
"""
import json
import os
import pathlib
import subprocess
import sys

root = pathlib.Path(os.environ.get("MEMTUNE_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
memtune = sys.argv[1]
out = subprocess.run([memtune, "validate", str(root / "tests/data/measured-megatron-ci.jsonl"),
                      "--format", "json"], capture_output=True, text=True, check=True)
report = json.loads(out.stdout)
summary = report["summary"]
errors = [abs(c["error_pct"]) for c in report["cases"] if c["predicted_bytes"] is not None]
within5 = sum(e <= 5 for e in errors)
failures = []
if summary["predicted"] < 85:
    failures.append(f"only {summary['predicted']} of {summary['cases']} cases predicted (was 88)")
if summary["median_abs_error_pct"] > 2.0:
    failures.append(f"median |error| {summary['median_abs_error_pct']:.2f}% > 2.0% (was 1.1%)")
if within5 < 0.85 * len(errors):
    failures.append(f"{within5} of {len(errors)} cases within 5% (< 85%; was 79 of 88)")
for f in failures:
    print("FAIL:", f)
print(f"megatron-ci: {summary['predicted']} predicted, median {summary['median_abs_error_pct']:.2f}%, "
      f"{within5}/{len(errors)} within 5%")
sys.exit(1 if failures else 0)
