#!/usr/bin/env bash
# The one prepared GPU command: runs the whole calibration matrix on the GPU present
# (sized to its memory), both allocator modes, within 10 minutes, and leaves everything
# under $OUT/gpu/, ready to be committed as tests/data/gpu/ (see docs/calibrate.md).
#
#   OUT=/some/dir tools/calibrate/gpu_run.sh [extra run.py options, e.g. --only NAME]
#
# Limits: the whole run stops at TOTAL_S (default 570 s; run.py plans for BUDGET_S = 540 s
# and skips what no longer fits), each workload process at PER_RUN_S (default 75 s); an
# overrun kills that process and is recorded as "timeout" in summary.md, the rest go on.
set -uo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3}"
dest="${OUT:-$PWD/out}/gpu"
total_s="${TOTAL_S:-570}"
budget_s="${BUDGET_S:-540}"
per_run_s="${PER_RUN_S:-75}"
mkdir -p "$dest"

probe="$("$python" "$here/run.py" --probe)" || { echo "gpu_run.sh: $python cannot run the harness" >&2; exit 2; }
echo "probe: $probe"
case "$probe" in
  *'"cuda": true'*) ;;
  *) echo "gpu_run.sh: no CUDA device visible to PyTorch ($probe)" >&2; exit 2 ;;
esac
nvidia-smi > "$dest/nvidia-smi.txt" 2>&1 || true

timeout -k 15 "$total_s" "$python" "$here/run.py" --out "$dest" --budget-s "$budget_s" \
  --per-run-s "$per_run_s" "$@" 2>&1 | tee "$dest/run.log"
status=${PIPESTATUS[0]}
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
  echo "gpu_run.sh: stopped at the ${total_s} s limit; summarising the runs that finished" >&2
  "$python" "$here/run.py" --out "$dest" --report-only "$@" | tee -a "$dest/run.log"
fi
du -sh "$dest"/snapshots 2>/dev/null || true
exit "$status"
