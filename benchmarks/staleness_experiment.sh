#!/usr/bin/env bash
# Sampling ahead (issue 47): is rollout.max_staleness 1 or 2 better than the synchronous step (0) on this machine?
# Each k trains the default preset for the same wall-time budget (MINUTES, the training phase), 3 seeds a side; each
# trained run is then evaluated on the same held-out problems (pass@1 from N samples, plus greedy) and compared with
# the synchronous run of its seed, paired by problem (rlvr compare, k = 0 the baseline). Last, the tables of
# benchmarks/staleness_pool.py (one row per run, then each k pooled over the seeds, paired by problem) and each
# seed's comparison. Run with nothing else on the machine: the arms are time-budgeted. The default of
# rollout.max_staleness follows the result (docs/scaling.md, "Sampling ahead", has the run of 2026-12-04).
#
#   benchmarks/staleness_experiment.sh                      # k = 0 1 2, seeds 0 1 2, 15 minutes each: about 2.5 h
#   MINUTES=5 benchmarks/staleness_experiment.sh            # the run in docs/scaling.md: about 80 minutes
#   KS="0 1" SEEDS=0 MINUTES=3 OUT=/tmp/st benchmarks/staleness_experiment.sh
#   DRY_RUN=1 benchmarks/staleness_experiment.sh            # print the commands only
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/staleness}
KS=${KS:-0 1 2}
SEEDS=${SEEDS:-0 1 2}
MINUTES=${MINUTES:-15}
CONFIG=${CONFIG:-default}
R=${R:-.venv/bin/rlvr}
PY=${PY:-.venv/bin/python}
# train.steps only bounds the run: the time budget ends it. No validation, checkpoint or merged model inside the
# budget (they would take the arms' time unevenly); the run's final adapter is what is evaluated.
B=(--set train.time_budget_min="$MINUTES" --set train.steps=1000 --set log.eval_every=0 --set 'eval.out_of_domain=[]'
   --set log.checkpoint_every=0 --set log.checkpoint_minutes=0 --set model.save_merged=false)
E=(--n "${N:-4}" --limit "${LIMIT:-60}" --backend fast --seed 0 --quiet)
read -ra X <<< "${EXTRA:-}"  # more training arguments, words without spaces (a smoke test: a tiny model, one step)

exec 3>&1  # the terminal, for DRY_RUN's lines (each command's own output goes to its log)
run() {  # the command, or only its line under DRY_RUN=1
  if [ -n "${DRY_RUN:-}" ]; then echo "$*" >&3; else "$@"; fi
}

mkdir -p "$OUT"
for s in $SEEDS; do
  for k in $KS; do
    name="k$k-seed$s"
    date
    run "$R" train "$CONFIG" "${B[@]}" "${X[@]}" --set seed="$s" --set rollout.max_staleness="$k" \
      --output-dir "$OUT/$name" > "$OUT/$name.train.log" 2>&1
    run "$R" eval --model "$OUT/$name" "${E[@]}" --out "$OUT/eval-$name" > "$OUT/$name.eval.log" 2>&1
  done
  pairs=()
  for k in $KS; do pairs+=("k$k=$OUT/eval-k$k-seed$s/records.jsonl"); done
  run "$R" compare "${pairs[@]}" --out "$OUT/compare-seed$s" > "$OUT/compare-seed$s.log" 2>&1
done
date
[ -n "${DRY_RUN:-}" ] && exit 0

"$PY" benchmarks/staleness_pool.py "$OUT" "$KS" "$SEEDS"
echo
for s in $SEEDS; do
  echo "## seed $s: held-out pass@1 per band, paired by problem against k = ${KS%% *}"
  echo
  cat "$OUT/compare-seed$s/compare.md"
done
