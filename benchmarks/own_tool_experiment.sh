#!/usr/bin/env bash
# Own tool, bootstrapped (issue 50): does a tool of one's own, taught from reference traces written by a function of
# the row, beat the same RL budget without the tool on held-out problems? On docs/examples/unit_prices (price word
# problems, mytools.unit_price, mytools.reference_trace), the embedded default model:
#   1. sft:      SFT on the written traces (sft.source: reference, sft.reference: mytools:reference_trace);
#   2. tools:    RL with the tool from the SFT model, MINUTES of training;
#   3. no_tools: RL without the tool from the start model, the same MINUTES and step cap (episode.environment none,
#                task.settings.demo NO_TOOLS_DEMO: `auto`, the jsonl default, is the no-tool user's best start; the
#                tool runs use `none`, the traces teach them the format). The SFT phase is the tool arm's extra cost:
#                its minutes are printed from sft_data.json / the logs, not matched;
#   4. rlvr eval of the start model (without tools), sft, tools and no_tools on the same held-out problems (episodes
#      where the run has the tool), and rlvr compare, paired by problem, against no_tools.
# Run with nothing else on the machine: the RL arms are time-budgeted. The figures go to docs/your-data.md ("Your
# own tool") as measured.
#
#   benchmarks/own_tool_experiment.sh                       # 6 minutes of RL a side
#   MINUTES=10 OUT=/tmp/own benchmarks/own_tool_experiment.sh
#   DRY_RUN=1 benchmarks/own_tool_experiment.sh             # print the commands only
#   MODEL=/tmp/tiny STEPS=1 LIMIT=6 N=1 EXTRA="--set sft.max_examples=8" benchmarks/own_tool_experiment.sh  # smoke
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
EX=$ROOT/docs/examples/unit_prices
OUT=${OUT:-/tmp/own-tool}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
MINUTES=${MINUTES:-6}
STEPS=${STEPS:-1000}  # only a cap: the time budget ends each RL arm
MODEL=${MODEL:-smollm2-135m-instruct}
NO_TOOLS_DEMO=${NO_TOOLS_DEMO:-auto}
R=${R:-$ROOT/.venv/bin/rlvr}
read -ra X <<< "${EXTRA:-}"  # more sft/train arguments, words without spaces
# No validation, checkpoint or merged model inside the RL budget (they would take the arms' time unevenly); rlvr eval
# merges the final adapter. The SFT run keeps final/merged: the tool arm starts from it.
B=(--set train.time_budget_min="$MINUTES" --set train.steps="$STEPS" --set log.eval_every=0
   --set log.checkpoint_every=0 --set log.checkpoint_minutes=0 --set model.save_merged=false)
E=(--n "${N:-4}" --backend fast --seed 0 --quiet)
[ -n "${LIMIT:-}" ] && E+=(--limit "$LIMIT")
DATA=(--set 'task.settings.splits={train: train.jsonl, heldout: heldout.jsonl}' --set task.settings.answer_form=number)

exec 3>&1  # the terminal, for DRY_RUN's lines (each command's own output goes to its log)
run() {  # the command, or only its line under DRY_RUN=1
  if [ -n "${DRY_RUN:-}" ]; then echo "$*" >&3; else "$@"; fi
}

cd "$EX"  # the config's data paths and `mytools` are this folder's
export PYTHONPATH="$EX${PYTHONPATH:+:$PYTHONPATH}"
date
run "$R" sft unit_prices.yaml --set model.name="$MODEL" "${X[@]}" --output-dir "$OUT/sft" > "$OUT/sft.log" 2>&1
date
run "$R" train unit_prices.yaml "${B[@]}" "${X[@]}" --set model.name="$OUT/sft/final/merged" \
  --output-dir "$OUT/tools" > "$OUT/tools.log" 2>&1
date
run "$R" train unit_prices.yaml "${B[@]}" "${X[@]}" --set model.name="$MODEL" --set episode.environment=none \
  --set 'episode.tools=[]' --set task.settings.demo="$NO_TOOLS_DEMO" --output-dir "$OUT/no-tools" \
  > "$OUT/no-tools.log" 2>&1
date
run "$R" eval --model "$MODEL" --task jsonl "${DATA[@]}" --set task.settings.demo="$NO_TOOLS_DEMO" "${E[@]}" \
  --out "$OUT/eval-start" > "$OUT/eval-start.log" 2>&1
for m in sft tools no-tools; do
  run "$R" eval --model "$OUT/$m" "${E[@]}" --out "$OUT/eval-$m" > "$OUT/eval-$m.log" 2>&1
done
run "$R" compare start="$OUT/eval-start/records.jsonl" sft="$OUT/eval-sft/records.jsonl" \
  tools="$OUT/eval-tools/records.jsonl" no_tools="$OUT/eval-no-tools/records.jsonl" --baseline no_tools \
  --out "$OUT/compare" > "$OUT/compare.log" 2>&1
date
[ -n "${DRY_RUN:-}" ] && exit 0
cat "$OUT/compare/compare.md"
for m in tools no-tools; do
  echo "$m: $(grep -c '' "$OUT/$m/metrics.jsonl") RL steps in $MINUTES minutes"
done
echo "sft: $(tr -d '\n' < "$OUT/sft/sft_data.json")"
