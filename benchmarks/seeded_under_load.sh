#!/usr/bin/env bash
# Does load change what a seeded run samples? (issue 51) The same seeded 2-step run of the default preset, small
# enough to finish in minutes, four times: alone, beside a plain CPU hog (two busy-looping processes), and twice side
# by side. benchmarks/same_run.py then compares each with the quiet run: metrics (times aside), samples and the final
# adapter, exactly. Run it with nothing else on the machine.
#
#   bash benchmarks/seeded_under_load.sh [OUT]        (OUT: runs/seeded-under-load)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/seeded-under-load}
PY=${PY:-.venv/bin/python}
rm -rf "$OUT" && mkdir -p "$OUT"
run() {  # $1: run folder
  "$PY" -m rlvr train default --set train.steps=2 --set log.eval_every=0 --set log.samples_every=1 \
    --set rollout.prompts_per_step=2 --set rollout.group_size=8 --set rollout.max_new_tokens=48 \
    --set train.time_budget_min=0 --output-dir "$1" > "$1.log" 2>&1
}
hog() { "$PY" -c "while True: pass" & }

t0=$SECONDS; run "$OUT/quiet"; echo "quiet: $((SECONDS - t0)) s"
hog; H1=$!; hog; H2=$!
t0=$SECONDS; run "$OUT/hog"; echo "beside two CPU hogs: $((SECONDS - t0)) s"
kill "$H1" "$H2"
t0=$SECONDS; run "$OUT/pair-a" & A=$!; run "$OUT/pair-b"; wait "$A"; echo "two side by side: $((SECONDS - t0)) s"
status=0
for r in hog pair-a pair-b; do
  echo "== quiet vs $r"; "$PY" benchmarks/same_run.py "$OUT/quiet" "$OUT/$r" || status=1
done
exit $status
