"""The llama.cpp engine worker of `rlvr bench --vs llamacpp`, without llama.cpp (rlvr's venv never has it): the module
imports and states its contract, the context sizing, the converter's default place, and the numpy sampler the
worker draws every row's token with, by hand."""

import importlib.util
import math
import sys

import numpy as np
import pytest

from rlvr_bench.engines import ENGINES, engine_module, llamacpp


def test_the_module_imports_without_llama_cpp():
    assert ENGINES["llamacpp"] == "rlvr_bench.engines.llamacpp" and engine_module("llamacpp") is llamacpp
    if importlib.util.find_spec("llama_cpp") is None:
        assert "llama_cpp" not in sys.modules  # imported inside the worker only


def test_contract_is_consistent():
    assert llamacpp.PRECISIONS[0] == "bf16" and "q8_0" in llamacpp.PRECISIONS
    assert llamacpp.PACKAGES["llama_cpp"].startswith("llama-cpp-python") and "numpy" in llamacpp.PACKAGES
    recipe = llamacpp.RECIPE
    assert recipe.startswith("python3 -m venv llamacpp-venv") and "torch==2.13.0" in recipe
    assert llamacpp.PACKAGES["torch"] == "torch==2.13.0"  # a pip hint never installs an unpinned torch
    assert f"llama-cpp-python=={llamacpp.VERSION}" in recipe and "--no-binary :all:" in recipe
    # the recipe unpacks the converter where the worker looks for it by default
    assert "-C llamacpp-venv/llama.cpp" in recipe and "vendor/llama.cpp" in recipe
    assert "yes" in llamacpp.LOGPROBS and "\n" not in llamacpp.LOGPROBS


def test_converter_path(monkeypatch):
    monkeypatch.delenv(llamacpp.CONVERTER_ENV, raising=False)
    assert (
        str(llamacpp.converter_path({}, prefix="/v/llamacpp-venv"))
        == "/v/llamacpp-venv/llama.cpp/convert_hf_to_gguf.py"
    )
    assert str(llamacpp.converter_path({"converter": "/c/convert.py"}, prefix="/v")) == "/c/convert.py"
    monkeypatch.setenv(llamacpp.CONVERTER_ENV, "/e/convert.py")
    assert str(llamacpp.converter_path({"converter": "/c/convert.py"})) == "/e/convert.py"


def test_context_sizes():
    steps = [[[1] * 100, [1] * 90], [[1] * 120, [1] * 10]]  # 2 batches of P=2 prompts
    # per-sequence streams: 2*4 = 8 sequences, each padded to 256 cells >= 120 + 128
    assert llamacpp.context_sizes(steps, 4, 128, False) == {"n_ctx": 8 * 256, "n_batch": 190, "n_seq_max": 8}
    # unified: the prompts once (190 at most) + 8 rows x 128, padded to 256
    assert llamacpp.context_sizes(steps, 4, 128, True) == {"n_ctx": 1280, "n_batch": 190, "n_seq_max": 8}
    assert llamacpp.context_sizes([[[1] * 5]], 64, 16, True)["n_batch"] == 64  # a decode step of 64 rows


def test_sample_rows_log_prob_by_hand():
    logits = np.array([[0.0, math.log(3.0), -np.inf, 0.0]], dtype=np.float32)  # probabilities 1/5, 3/5, 0, 1/5
    seen = set()
    for seed in range(40):
        tok, logp = llamacpp.sample_rows(logits, 1.0, np.random.default_rng(seed))
        assert tok.shape == (1,) and tok[0] != 2
        assert logp[0] == pytest.approx(math.log([0.2, 0.6, 0.0, 0.2][tok[0]]), abs=1e-6)
        seen.add(int(tok[0]))
    assert seen == {0, 1, 3}


def test_sample_rows_applies_the_temperature():
    logits = np.array([[0.0, 1.0]], dtype=np.float32)
    for t in (0.5, 1.0, 2.0):
        tok, logp = llamacpp.sample_rows(logits, t, np.random.default_rng(0))
        p1 = 1 / (1 + math.exp(-1.0 / t))  # softmax of [0, 1/t]
        assert logp[0] == pytest.approx(math.log(p1 if tok[0] == 1 else 1 - p1), abs=1e-6)
    # greedy: the argmax, its log-prob at temperature 1
    tok, logp = llamacpp.sample_rows(np.array([[2.0, 0.0, 5.0]], dtype=np.float32), 0.0, None)
    assert tok[0] == 2 and logp[0] == pytest.approx(5 - math.log(math.exp(2) + 1 + math.exp(5)), abs=1e-6)


def test_sample_rows_draws_follow_the_distribution():
    # a vocabulary spanning several BLOCKs, mass spread over the blocks; rows drawn independently
    vocab, rows = 3 * llamacpp.BLOCK + 17, 20_000
    rng = np.random.default_rng(1)
    base = np.full(vocab, -np.inf, dtype=np.float32)
    picks = [3, llamacpp.BLOCK - 1, llamacpp.BLOCK, 2 * llamacpp.BLOCK + 5, vocab - 1]
    base[picks] = np.log(np.array([0.1, 0.2, 0.3, 0.15, 0.25], dtype=np.float32))
    base[np.isinf(base)] = np.log(1e-9)  # non-zero mass elsewhere, drawn ~never
    tokens, logp = llamacpp.sample_rows(np.tile(base, (rows, 1)), 1.0, rng)
    freq = np.bincount(tokens, minlength=vocab)[picks] / rows
    assert freq == pytest.approx([0.1, 0.2, 0.3, 0.15, 0.25], abs=0.015)
    probs = np.exp(base.astype(np.float64) - np.logaddexp.reduce(base.astype(np.float64)))
    assert np.allclose(logp, np.log(probs[tokens]), atol=1e-5)


def test_sample_rows_vectorised_rows_are_independent_of_each_other():
    # two rows with opposite preferences: each row's draw follows its own logits
    logits = np.array([[5.0, -5.0], [-5.0, 5.0]], dtype=np.float32)
    tokens, _ = llamacpp.sample_rows(np.tile(logits, (500, 1)), 1.0, np.random.default_rng(2))
    assert (tokens[0::2] == 0).mean() > 0.98 and (tokens[1::2] == 1).mean() > 0.98
