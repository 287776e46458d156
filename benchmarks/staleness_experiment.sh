#!/usr/bin/env bash
# Sampling ahead (issue 47): is rollout.max_staleness 1 or 2 better than the synchronous step (0) on this machine?
# Each k trains the default preset for the same wall-time budget (MINUTES, the training phase), 3 seeds a side; each
# trained run is then evaluated on the same held-out problems (pass@1 from N samples, plus greedy) and compared with
# the synchronous run of its seed, paired by problem (rlvr compare, k = 0 the baseline). Last, one table per run:
# steps done, steps per minute (RUN/contention.json), the staleness, wait, mismatch and correction figures (means
# over steps of metrics.jsonl), and pass@1 per seed from the comparisons. Run with nothing else on the machine: the
# arms are time-budgeted. The default of rollout.max_staleness follows the result (docs/scaling.md, "Sampling ahead").
#
#   benchmarks/staleness_experiment.sh                      # k = 0 1 2, seeds 0 1 2, 15 minutes each: about 2.5 h
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

"$PY" - "$OUT" $KS -- $SEEDS <<'EOF'
import json, sys
from pathlib import Path

out, rest = Path(sys.argv[1]), sys.argv[2:]
ks, seeds = rest[: rest.index("--")], rest[rest.index("--") + 1 :]
keys = ["async/staleness_mean", "time/wait_rollouts_s", "time/wait_weights_s", "mismatch/k3_kl",
        "mismatch/abs_log_ratio", "correction/weight_mean", "reward/mean"]
print("| run | steps | steps/min | " + " | ".join(keys) + " |")
print("|---" * (3 + len(keys)) + "|")
for s in seeds:
    for k in ks:
        run = out / f"k{k}-seed{s}"
        rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
        speed = json.loads((run / "contention.json").read_text())
        means = [sum(r[x] for r in rows if x in r) / max(1, sum(x in r for r in rows)) if any(x in r for r in rows)
                 else float("nan") for x in keys]
        cells = [f"{v:.4f}" for v in means]
        print(f"| k{k} seed {s} | {speed['steps']} | {speed['steps_per_min']:.2f} | " + " | ".join(cells) + " |")
print()
for s in seeds:
    print(f"## seed {s}: held-out pass@1, paired by problem against k = {ks[0]}\n")
    print((out / f"compare-seed{s}" / "compare.md").read_text())
EOF
