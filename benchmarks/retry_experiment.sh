#!/usr/bin/env bash
# The retry experiment on the default task (#31): single-attempt RLVR vs RLVR with retry, same budget; both
# evaluated single-attempt on the same held-out problems (paired), and with the retry
# environment for accuracy by attempt; the start model evaluated the same two ways, on the same problems.
# Run with nothing else on the machine: both arms are time-budgeted. Results: docs/results.md, "Retry".
# DTYPE=float32 computes in float32 (how it was first run, on a machine without AVX-512); by default each dtype is the
# machine's own (`auto`: bf16 sampling and autocast where the CPU has AVX512-BF16).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/exp}
DTYPE=${DTYPE:-auto}
AUTOCAST=$([ "$DTYPE" = float32 ] && echo none || echo "$DTYPE")
mkdir -p "$OUT"
R=.venv/bin/rlvr
B=(--set rollout.dtype=$DTYPE --set train.autocast=$AUTOCAST --set train.time_budget_min=15 --set train.steps=400
   --set log.eval_every=0 --set 'eval.out_of_domain=[]' --set log.checkpoint_every=0 --set model.save_merged=false)
E=(--n 4 --limit 60 --backend fast --set rollout.dtype=$DTYPE)
date
$R train default "${B[@]}" --output-dir $OUT/single > $OUT/single.log 2>&1
date
$R train default "${B[@]}" --set episode.environment=retry --set episode.attempts=3 --output-dir $OUT/retry > $OUT/retry.log 2>&1
date
START=(--model smollm2-135m-instruct --task arithmetic --set task.settings.seed=0 --set task.settings.per_band=2000
       --set 'task.settings.bands=[1-digit, 2-digit, 3-digit]' --set task.settings.one_shot=true)
$R eval "${START[@]}" "${E[@]}" --set episode.environment=none --out $OUT/eval1-start > $OUT/eval1-start.log 2>&1
$R eval "${START[@]}" "${E[@]}" --set episode.environment=retry --set episode.attempts=3 --max-new-tokens 128 --out $OUT/eval3-start > $OUT/eval3-start.log 2>&1
for m in single retry; do
  $R eval --model $OUT/$m "${E[@]}" --set episode.environment=none --out $OUT/eval1-$m > $OUT/eval1-$m.log 2>&1
  $R eval --model $OUT/$m "${E[@]}" --set episode.environment=retry --set episode.attempts=3 --max-new-tokens 128 --out $OUT/eval3-$m > $OUT/eval3-$m.log 2>&1
  date
done
$R compare start=$OUT/eval1-start/records.jsonl single=$OUT/eval1-single/records.jsonl retry=$OUT/eval1-retry/records.jsonl --out $OUT/cmp1 > $OUT/cmp1.log 2>&1
$R compare start=$OUT/eval3-start/records.jsonl single=$OUT/eval3-single/records.jsonl retry=$OUT/eval3-retry/records.jsonl --out $OUT/cmp3 > $OUT/cmp3.log 2>&1
date
echo done
