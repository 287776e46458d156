#!/usr/bin/env bash
# Issue 74's workload (docs/performance.md, "The reasoning workload"): one GRPO step of Qwen2.5-Coder-0.5B-Instruct
# writing up to 400 tokens of reasoning, 4 prompts x 8, on docs/examples/multi_step (issue 72's experiment), rlvr
# against TRL's GRPOTrainer, each framework alone in memory one after the other (--sequential: both loaded at once
# outgrow 24 GB here), each phase against its ceiling.
#
#   RLVR_TRL_PYTHON=/path/to/trl-venv/bin/python bash benchmarks/bench_reasoning.sh [OUT.json] [extra bench args]
#
# MODEL: the checkpoint (a GGUF file, a converted folder or a hub id; default: the GGUF that
# benchmarks/reasoning_experiment.sh fetches). FW=rlvr measures rlvr alone; DTYPE=bfloat16 on a kind with bf16.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/bench-reasoning.json}
shift || true
MODELS=${RLVR_MODELS:-$HOME/.cache/rlvr/models}
MODEL=${MODEL:-$MODELS/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf}
DATA=$PWD/docs/examples/multi_step
mkdir -p "$(dirname "$OUT")"
.venv/bin/rlvr bench --model "$MODEL" --config "$DATA/multi_step.yaml" \
  --set "task.settings.splits={train: $DATA/train.jsonl, heldout: $DATA/heldout.jsonl}" --set task.settings.demo=none \
  -P 4 -G 8 --max-new-tokens 400 --dtype "${DTYPE:-float32}" --frameworks "${FW:-rlvr,trl}" \
  --steps "${STEPS:-1}" --warmup "${WARMUP:-0}" --sequential --json "$OUT" "$@"
