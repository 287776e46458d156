"""Sampler-vs-trainer mismatch on the same steps, per rollout backend: fast, hf, vLLM in process, remote vLLM.

    python benchmarks/mismatch_engines.py [--steps 3] [--out DIR]

Each backend trains the same few steps of the default preset (seed 0, so the same prompts; 4 prompts x 8 samples
of up to 48 tokens), and the table prints each step's `mismatch/k3_kl` and `mismatch/abs_log_ratio`
(docs/metrics.md): how far the sampler's log-probs of its own tokens are from the trainer's forward on them. The
trainer is float32 here (`auto` on a CPU without bf16 in hardware); each sampler's dtype is in the table. vLLM runs
from .venv-vllm (`make vllm-venv`): in process with `rollout.backend: vllm`, and as one `vllm serve` on 127.0.0.1
for `remote`. Run it with nothing else on the machine; it takes about 10 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VLLM_PY = ROOT / ".venv-vllm" / "bin" / "python"
ENV = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
SMALL = ["rollout.prompts_per_step=4", "rollout.group_size=8", "rollout.max_new_tokens=48", "log.eval_every=0"]
VLLM = ["rollout.vllm.enforce_eager=true", "rollout.vllm.max_model_len=1024", "rollout.vllm.gpu_memory_utilization=0.2"]
RUN = "import sys; from rlvr.cli import main; sys.exit(main())"


def train(python, out: Path, steps: int, sets: list[str]) -> list[dict]:
    done = out / "metrics.jsonl"
    if done.exists() and len(done.read_text().splitlines()) == steps:  # a finished run of an earlier call: kept
        return [json.loads(x) for x in done.read_text().splitlines()]
    args = ["train", "default", "--overwrite", "--set", f"train.steps={steps}", "--set", f"output_dir={out}"]
    for s in [*SMALL, *sets]:
        args += ["--set", s]
    done = subprocess.run([str(python), "-c", RUN, *args], capture_output=True, text=True, env=ENV)
    if done.returncode:
        sys.exit(f"{out.name} failed:\n{done.stderr[-2000:]}")
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]


def serve(model: str, dtype: str) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [str(VLLM_PY), "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--dtype", dtype, "--max-model-len", "1024", "--enforce-eager"]
    cmd += [
        "--gpu-memory-utilization",
        "0.2",
        "--enable-lora",
        "--max-lora-rank",
        "16",
        "--max-loras",
        "2",
        "--no-enable-chunked-prefill",
    ]
    cmd += ["--logprobs-mode", "processed_logprobs"]
    log = open(tempfile.mktemp(suffix=".log"), "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=ENV, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(url + "/v1/models", timeout=5).read()
            return proc, url
        except OSError:
            if proc.poll() is not None:
                sys.exit(f"vllm serve exited; its log: {log.name}")
            time.sleep(2)
    sys.exit("vllm serve not ready in 10 minutes")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp(prefix="rlvr-mismatch-")))
    args = ap.parse_args()
    from rlvr.policy.load import resolve_model_path

    model = resolve_model_path("smollm2-135m-instruct")
    here = sys.executable
    runs = {
        "fast (float32)": (here, ["rollout.backend=fast", "rollout.dtype=float32"]),
        "hf (float32)": (here, ["rollout.backend=hf", "rollout.dtype=float32"]),
        "vllm in process (float32)": (VLLM_PY, ["rollout.backend=vllm", "rollout.vllm.dtype=float32", *VLLM]),
        "vllm in process (bf16)": (VLLM_PY, ["rollout.backend=vllm", "rollout.vllm.dtype=bfloat16", *VLLM]),
    }
    table = {}
    for name, (python, sets) in runs.items():
        t0 = time.time()
        rows = train(
            python, args.out / re.sub(r"\W+", "-", name).strip("-"), args.steps, [f"model.name={model}", *sets]
        )
        table[name] = (rows, time.time() - t0)
    proc, url = serve(model, "bfloat16")
    try:
        t0 = time.time()
        rows = train(here, args.out / "remote", args.steps, [f"model.name={model}", "rollout.backend=remote",
                                                               f"rollout.urls=[{url}]"])  # fmt: skip
        table["remote vllm serve (bf16)"] = (rows, time.time() - t0)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
    print(f"\n{args.steps} steps of the default preset (seed 0), trainer float32; runs in {args.out}\n")
    print("| backend (sampler dtype) | step | tokens | mismatch/k3_kl | mismatch/abs_log_ratio | run s |")
    print("|---|---|---|---|---|---|")
    for name, (rows, secs) in table.items():
        for r in rows:
            k3, ab, n = r.get("mismatch/k3_kl"), r.get("mismatch/abs_log_ratio"), r.get("mismatch/tokens", 0)
            figs = f"{k3:.2e} | {ab:.2e}" if n else "- | -"
            print(f"| {name} | {r['step']} | {int(n)} | {figs} | {secs:.0f} |")


if __name__ == "__main__":
    main()
