#!/bin/bash
# No accuracy bought with speed: two paths of the same 20 GRPO steps (same seed, same prompts, 4 x 8 completions,
# at most 64 new tokens, the default task), then their curves side by side:
#   PAIR=precision (default): the default bf16 path (bf16 sampler, bf16 autocast) against the float32 path;
#   PAIR=native: the bf16 sampler with its native fused decode ops (rlvr.sampling.native) against torch's ops.
# Then: PAIR=... .venv/bin/python benchmarks/bf16_vs_fp32_plot.py FIGURE.png   (reads $OUT, default /tmp/eqv)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/eqv}
PAIR=${PAIR:-precision}
mkdir -p "$OUT"
COMMON="--set train.steps=20 --set train.time_budget_min=0 --set log.eval_every=0 --set log.checkpoint_every=0
        --set rollout.prompts_per_step=4 --set rollout.max_new_tokens=64"
if [ "$PAIR" = native ]; then PATHS="native torch"; else PATHS="bf16 fp32"; fi
for path in $PATHS; do
  NATIVE=1
  case $path in
    bf16|native) X="--set rollout.dtype=bfloat16 --set train.autocast=bfloat16" ;;
    torch) X="--set rollout.dtype=bfloat16 --set train.autocast=bfloat16"; NATIVE=0 ;;
    fp32) X="--set rollout.dtype=float32 --set train.autocast=none" ;;
  esac
  s=$(date +%s)
  RLVR_NATIVE=$NATIVE PYTHONPATH=src .venv/bin/python -m rlvr train default $COMMON $X --output-dir "$OUT/$path" \
    --overwrite > "$OUT/$path.log" 2>&1
  echo "$path rc=$? $(( $(date +%s) - s )) s" >> "$OUT/done.txt"
done
