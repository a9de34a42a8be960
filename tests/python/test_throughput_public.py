"""The step-time model on the public throughput groups (docs/validation.md, "Throughput").

Reads ../shared/data/throughput-public.jsonl (78 published runs in 16 side-by-side groups;
skipped when the folder is absent, never copied into the project) and checks that every case
parses, that the order of cases within groups is right in at least 80% of the pairs (issue
17's bar), and that the seed study's PP 8 and `mlp` recompute costs are within 3 percentage
points of the measured ones. It prints the summary it checked.
"""
import json
import os
import pathlib
import subprocess
import sys

root = pathlib.Path(os.environ.get("MEMTUNE_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2])).resolve()
data = root.parent / "shared/data/throughput-public.jsonl"
if not data.exists():
    print(f"skip: {data} is absent")
    sys.exit(0)
out = subprocess.run([sys.argv[1], "validate", str(data), "--format", "json"],
                     capture_output=True, text=True, check=True)
report = json.loads(out.stdout)
failures = []
errors = [c for c in report["cases"] if c["status"] == "error"]
if errors:
    failures.append(f"{len(errors)} cases do not parse: {[c['id'] for c in errors]}")
t = report["throughput_summary"]
order = t["pairs_right"] / max(1, t["pairs"])
print(f"throughput: {t['predicted']}/{t['cases']} predicted, |error| median "
      f"{t['median_abs_error_pct']:.1f}%, ratio |error| median {t['median_abs_ratio_error_pct']:.1f}%, "
      f"order {t['pairs_right']}/{t['pairs']} ({100 * order:.0f}%)")
if order < 0.8:
    failures.append(f"order right in {100 * order:.0f}% of pairs, below 80%")
seed = next(g for g in t["groups"] if g["group"] == "mb-seed-llama3-70b-sft-h100-fp8")
value = {c["id"]: c for c in report["cases"]}
base = value["mb-seed-baseline-es"]
for case, measured in (("mb-seed-more-pp", -5.1), ("mb-seed-recompute-mlp", -15.7)):
    predicted = 100 * (value[case]["predicted_value"] / base["predicted_value"] - 1)
    print(f"seed {case}: predicted {predicted:+.1f}% vs measured {measured:+.1f}%")
    if abs(predicted - measured) > 3:
        failures.append(f"{case}: {predicted:+.1f}% is more than 3 pp from {measured:+.1f}%")
if failures:
    print("\n".join(failures))
    sys.exit(1)
