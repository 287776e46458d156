#!/bin/bash
# No accuracy bought with speed: the default bf16 path (bf16 sampler, bf16 autocast in the update) against the
# float32 path, same seed and prompts, 20 GRPO steps of 4 x 8 completions on the default task. Then
#   .venv/bin/python benchmarks/bf16_vs_fp32_plot.py docs/figures/bf16_vs_fp32.png   (reads $OUT, default /tmp/eqv)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/eqv}
mkdir -p "$OUT"
COMMON="--set train.steps=20 --set train.time_budget_min=0 --set log.eval_every=0 --set log.checkpoint_every=0
        --set rollout.prompts_per_step=4 --set rollout.max_new_tokens=64"
for path in bf16 fp32; do
  if [ $path = bf16 ]; then X="--set rollout.dtype=bfloat16 --set train.autocast=bfloat16"
  else X="--set rollout.dtype=float32 --set train.autocast=none"; fi
  s=$(date +%s)
  PYTHONPATH=src .venv/bin/python -m rlvr train default $COMMON $X --output-dir "$OUT/$path" --overwrite > "$OUT/$path.log" 2>&1
  echo "$path rc=$? $(( $(date +%s) - s )) s" >> "$OUT/done.txt"
done
