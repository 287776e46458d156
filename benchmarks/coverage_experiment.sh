#!/usr/bin/env bash
# Coverage on the default task (#33): does RLVR raise pass@32, or only pass@1? The start model, and the SFT and RLVR
# models of a finished main job (RUN, e.g. `rlvr run --steps 104 --output-dir runs/steps-104`), each sampled 32 times
# on the same 60 held-out problems (20 a band) plus greedy, scored by the same verifier; then paired at every k.
# Results: docs/results.md, "Coverage". Run with nothing else on the machine only for the times: the figures do not
# depend on load.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${RUN:-runs/steps-104}
OUT=${OUT:-runs/coverage}
R=${R:-.venv/bin/rlvr}
E=(--n 32 --limit 60 --backend fast)
TASK=(--task arithmetic --set task.settings.seed=0 --set task.settings.per_band=2000
      --set 'task.settings.bands=[1-digit, 2-digit, 3-digit]' --set task.settings.one_shot=true)
mkdir -p "$OUT"
date
$R eval --model smollm2-135m-instruct "${TASK[@]}" "${E[@]}" --out "$OUT/start" > "$OUT/start.log" 2>&1
date
for m in sft rlvr; do
  $R eval --model "$RUN/$m" "${E[@]}" --out "$OUT/$m" > "$OUT/$m.log" 2>&1
  date
done
$R compare start="$OUT/start/records.jsonl" sft="$OUT/sft/records.jsonl" rlvr="$OUT/rlvr/records.jsonl" \
  --out "$OUT/compare" | tee "$OUT/compare.log"
