"""llama.cpp (llama-cpp-python's ctypes bindings) as a rollout engine: `rlvr bench --vs llamacpp`.

The worker converts rlvr's safetensors folder with llama.cpp's own `convert_hf_to_gguf.py` (bf16, or q8_0 as a
second, different-precision row), loads the GGUF through the low-level C API and samples the GRPO shape the way
`llama-batched-bench` drives it: one llama_decode prefills the P prompts (each its own sequence, logits at its
last token only), llama_memory_seq_cp gives each prompt's KV to its G rows (one unified KV cache, so the rows share
the prompt's cells rather than copies of them), then every decode step is one llama_decode carrying the one new
token of every row still alive. The rows' next tokens are drawn here, in numpy,
from the full-vocabulary logits llama_decode returns (temperature only: top_p 1, top_k 0), so every sampled
token's log-prob comes with it. (The high-level `Llama` class samples one sequence at a time, which is not what
a user with this shape would run.)

Runs only as a child under llama.cpp's own venv (RECIPE); nothing here imports llama_cpp or numpy at module
level, so rlvr's venv can import the module to read its constants.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

VERSION = "0.3.36"
PACKAGES = {
    "llama_cpp": f"llama-cpp-python=={VERSION}",
    "numpy": "numpy",
    # what convert_hf_to_gguf.py (and the gguf-py package beside it) imports
    "torch": "torch==2.13.0",
    "transformers": "transformers",
    "sentencepiece": "sentencepiece",
    "safetensors": "safetensors",
    "yaml": "pyyaml",
    "tqdm": "tqdm",
}
# llama-cpp-python builds llama.cpp from source (cmake, a C/C++ compiler; a few minutes on 2 cores); its sdist
# carries the matching llama.cpp tree, whose converter (and gguf-py) the last two steps unpack into the venv
RECIPE = (
    "python3 -m venv llamacpp-venv && llamacpp-venv/bin/pip install torch==2.13.0 && "
    f"CMAKE_ARGS=-DGGML_NATIVE=ON llamacpp-venv/bin/pip install llama-cpp-python=={VERSION} numpy sentencepiece "
    "transformers && "
    f"llamacpp-venv/bin/pip download --no-deps --no-binary :all: llama-cpp-python=={VERSION} -d llamacpp-venv/sdist && "
    f"mkdir -p llamacpp-venv/llama.cpp && tar xzf llamacpp-venv/sdist/llama_cpp_python-{VERSION}.tar.gz "
    f"-C llamacpp-venv/llama.cpp --strip-components=3 llama_cpp_python-{VERSION}/vendor/llama.cpp"
)
PRECISIONS = ("bf16", "q8_0")
LOGPROBS = (
    "yes: every sampled token's, the log-softmax (at the temperature) of the full-vocabulary logits "
    "llama_decode returns for its row, taken in numpy where the token is drawn"
)
CONVERTER_ENV = "RLVR_LLAMACPP_CONVERTER"
BLOCK = 256  # vocabulary block of the two-level inverse-CDF draw in sample_rows


def converter_path(spec: dict | None = None, prefix: str | None = None) -> Path:
    """llama.cpp's convert_hf_to_gguf.py: $RLVR_LLAMACPP_CONVERTER, else the spec's `converter`, else where the
    RECIPE unpacks it, `<venv>/llama.cpp/convert_hf_to_gguf.py` (the venv of the interpreter running this)."""
    given = os.environ.get(CONVERTER_ENV) or (spec or {}).get("converter")
    return Path(given) if given else Path(prefix or sys.prefix) / "llama.cpp" / "convert_hf_to_gguf.py"


def context_sizes(prompt_ids: list[list[list[int]]], group: int, max_new_tokens: int, kv_unified: bool) -> dict:
    """n_ctx, n_batch, n_seq_max for every batch of `prompt_ids` (steps x P prompts as token ids).

    One decode holds a batch's whole prefill or one token per row, so n_batch covers the larger. A unified cache
    (the worker's default) holds each prompt once, its cells shared by its group's rows, plus every row's
    completion; with per-sequence KV streams (kv_unified False, the context's own default) each of the P*G sequences
    gets n_ctx / n_seq_max cells, which must hold its prompt and its completion.
    """
    rows = max(len(step) for step in prompt_ids) * group
    longest = max(len(p) for step in prompt_ids for p in step)
    prefill = max(sum(len(p) for p in step) for step in prompt_ids)
    if kv_unified:
        n_ctx = prefill + rows * max_new_tokens
    else:
        n_ctx = rows * _pad(longest + max_new_tokens, 256)
    return {"n_ctx": _pad(n_ctx, 256), "n_batch": max(prefill, rows), "n_seq_max": rows}


def _pad(n: int, to: int) -> int:
    return -(-n // to) * to


def sample_rows(logits, temperature: float, rng):
    """Draw one token per row of `logits` (rows x vocab, float32) at `temperature`; (tokens, log-probs).

    The draw is an inverse CDF with one uniform per row from `rng` (a numpy Generator), done in two levels to keep
    it to a few passes over the logits: the row's probability mass per block of BLOCK tokens, then the cumulative
    sum inside the one block the uniform falls in. The log-prob is the log-softmax of logits / temperature at the
    drawn token. temperature <= 0 is greedy (the log-prob then at temperature 1).
    """
    import numpy as np

    x = np.asarray(logits, dtype=np.float32)
    n, vocab = x.shape
    z = x - x.max(axis=1, keepdims=True)  # a new array: the logits buffer belongs to llama.cpp
    if temperature > 0 and temperature != 1:
        z *= np.float32(1.0 / temperature)
    e = np.exp(z)
    starts = np.arange(0, vocab, BLOCK)
    block = np.add.reduceat(e, starts, axis=1)
    cum = np.cumsum(block, axis=1, dtype=np.float64)
    total = cum[:, -1]
    if temperature <= 0:
        tokens = z.argmax(axis=1)
    else:
        target = rng.random(n) * total
        b = np.minimum((cum <= target[:, None]).sum(axis=1), len(starts) - 1)
        tokens = np.empty(n, dtype=np.int64)
        for i in range(n):
            s = starts[b[i]]
            inside = np.cumsum(e[i, s : s + BLOCK], dtype=np.float64) + (cum[i, b[i]] - block[i, b[i]])
            tokens[i] = s + min(int(np.searchsorted(inside, target[i], side="right")), len(inside) - 1)
    logp = z[np.arange(n), tokens].astype(np.float64) - np.log(total)
    return tokens, logp


def convert(spec: dict, outfile: Path) -> float:
    """Seconds llama.cpp's converter takes to write spec["model"] as a GGUF at spec["precision"]."""
    script = converter_path(spec)
    if not script.is_file():
        raise SystemExit(
            f"llama.cpp's converter not found at {script}: set ${CONVERTER_ENV} or make the venv with: {RECIPE}"
        )
    outfile.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(script), str(spec["model"]), "--outtype", spec["precision"], "--outfile", str(outfile)],
        capture_output=True,
        text=True,
        env={**os.environ, "TQDM_DISABLE": "1"},
    )
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{script} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return seconds


class Engine:
    """A loaded GGUF, its context (P*G sequences) and one reusable llama_batch."""

    def __init__(self, spec: dict):
        import llama_cpp.llama_cpp as L

        self.L, self.spec = L, spec
        # one KV cache for all sequences: llama_memory_seq_cp then only tags a prompt's cells with its rows' ids, and
        # it measured 460-490 tok/s here against 275-285 with per-sequence streams (kv_unified False, which copies
        # each prompt's stream to its rows); the spec's `kv_unified` can ask for the latter
        self.kv_unified = bool(spec.get("kv_unified", True))
        self.sizes = context_sizes(spec["prompt_ids"], spec["group"], spec["max_new_tokens"], self.kv_unified)
        L.llama_backend_init()
        self.batch = L.llama_batch_init(self.sizes["n_batch"], 0, 1)
        self.model = self.ctx = None

    def load(self, path: Path) -> None:
        L = self.L
        self.free()
        mparams = L.llama_model_default_params()
        mparams.n_gpu_layers = 0
        self.model = L.llama_model_load_from_file(str(path).encode(), mparams)
        if not self.model:
            raise RuntimeError(f"llama_model_load_from_file failed on {path}")
        cparams = L.llama_context_default_params()
        cparams.n_ctx = self.sizes["n_ctx"]
        cparams.n_batch = self.sizes["n_batch"]
        cparams.n_ubatch = min(self.sizes["n_batch"], 512)
        cparams.n_seq_max = self.sizes["n_seq_max"]
        cparams.n_threads = cparams.n_threads_batch = self.spec["threads"]
        cparams.kv_unified = self.kv_unified
        cparams.embeddings = False
        self.ctx = L.llama_init_from_model(self.model, cparams)
        if not self.ctx:
            raise RuntimeError(
                f"llama_init_from_model failed (n_ctx {self.sizes['n_ctx']}, n_seq_max {self.sizes['n_seq_max']})"
            )
        self.mem = L.llama_get_memory(self.ctx)
        self.n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(self.model))

    def free(self) -> None:
        if self.ctx:
            self.L.llama_free(self.ctx)
        if self.model:
            self.L.llama_model_free(self.model)
        self.model = self.ctx = None

    def decode(self, tokens, positions, seqs, want_logits) -> None:
        """One llama_decode of len(tokens) tokens, sequence seqs[i] at positions[i], logits where want_logits."""
        import numpy as np

        L, b, n = self.L, self.batch, len(tokens)
        b.n_tokens = n
        np.ctypeslib.as_array(b.token, shape=(n,))[:] = tokens
        np.ctypeslib.as_array(b.pos, shape=(n,))[:] = positions
        np.ctypeslib.as_array(b.n_seq_id, shape=(n,))[:] = 1
        np.ctypeslib.as_array(b.logits, shape=(n,))[:] = want_logits
        seq_id = b.seq_id
        for i, s in enumerate(seqs.tolist()):
            seq_id[i][0] = s
        rc = L.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc} ({n} tokens)")

    def logits(self, rows: int):
        """The last decode's logits, rows x vocab, in batch order (a view of llama.cpp's buffer)."""
        import numpy as np

        return np.ctypeslib.as_array(self.L.llama_get_logits(self.ctx), shape=(rows, self.n_vocab))

    def generate(self, step: int, prompts: list[list[int]]) -> dict:
        """P prompts x G rows: prefill once, share each prompt's KV with its rows, decode all live rows a step."""
        import numpy as np

        L, spec, G = self.L, self.spec, self.spec["group"]
        if spec.get("top_p", 1.0) < 1.0 or spec.get("top_k", 0) > 0:
            raise ValueError("the llama.cpp worker samples at temperature only (top_p 1, top_k 0)")
        stops = np.asarray(sorted(set(spec["stop_ids"])), dtype=np.int64)
        rng = np.random.default_rng(spec["seed"] * 1_000_003 + step)
        P, max_new, temp = len(prompts), spec["max_new_tokens"], spec["temperature"]
        R = P * G
        L.llama_memory_clear(self.mem, False)  # the previous batch's sequences
        # prefill: prompt p into sequence p*G (its first row), logits at its last token only
        lens = np.asarray([len(p) for p in prompts], dtype=np.int64)
        want = np.zeros(int(lens.sum()), dtype=np.int8)
        want[np.cumsum(lens) - 1] = 1
        self.decode(
            np.concatenate([np.asarray(p, dtype=np.int32) for p in prompts]),
            np.concatenate([np.arange(n, dtype=np.int32) for n in lens]),
            np.repeat(np.arange(P) * G, lens),
            want,
        )
        first = np.repeat(self.logits(P), G, axis=0)  # each row's first draw from its prompt's last logits
        for p in range(P):
            for g in range(1, G):
                L.llama_memory_seq_cp(self.mem, p * G, p * G + g, -1, -1)
        pos = np.repeat(lens, G)  # where each row's next token goes
        lengths = np.zeros(R, dtype=np.int64)
        stopped = np.zeros(R, dtype=bool)
        self.completions = out = np.full((R, max_new), -1, dtype=np.int64)  # the batch's tokens, -1 past the end
        logp_sum, live, logits = 0.0, np.arange(R), first
        while True:
            tokens, logp = sample_rows(logits, temp, rng)
            logp_sum += float(logp.sum())
            out[live, lengths[live]] = tokens
            lengths[live] += 1
            hit = np.isin(tokens, stops)
            stopped[live[hit]] = True
            keep = ~hit & (lengths[live] < max_new)
            live, tokens = live[keep], tokens[keep]
            if len(live) == 0:
                break
            self.decode(tokens.astype(np.int32), pos[live].astype(np.int32), live, np.ones(len(live), dtype=np.int8))
            pos[live] += 1
            logits = self.logits(len(live))
        from rlvr_bench.rollouts import step_result

        return step_result(
            [int(n) for n in lengths], int(stopped.sum()), spec["threads"], logp_sum / max(int(lengths.sum()), 1)
        )


def run_worker(spec: dict) -> None:
    """Child, under llama.cpp's venv: convert, load, then serve batches and syncs."""
    import logging

    import llama_cpp

    from rlvr_bench.engines import serve, timed

    if spec["precision"] not in PRECISIONS:
        raise SystemExit(f"llama.cpp worker: precision {spec['precision']!r} not in {PRECISIONS}")
    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)  # llama.cpp's log: errors only, to stderr
    work = Path(spec["work_dir"])
    state = {"n": 0, "file": work / f"model-{spec['precision']}-0.gguf"}
    convert_s = convert(spec, state["file"])
    engine = Engine(spec)
    _, load_s = timed(engine.load, state["file"])

    def sync() -> dict:
        # what a training step pays for new weights: convert the updated safetensors again and reload model and
        # context (the old ones freed first). llama.cpp could instead keep the base GGUF and apply the update as a
        # LoRA adapter (convert_lora_to_gguf.py, then llama_adapter_lora_init + llama_set_adapter_lora on the
        # context); that path is not measured here.
        old = state["file"]
        state["n"] += 1
        state["file"] = work / f"model-{spec['precision']}-{state['n']}.gguf"
        c = convert(spec, state["file"])
        _, load = timed(engine.load, state["file"])
        old.unlink(missing_ok=True)
        return {"convert_s": c, "load_s": load}

    serve(
        spec,
        engine.generate,
        sync,
        {
            "convert_s": convert_s,
            "load_s": load_s,
            "versions": {"llama_cpp": llama_cpp.__version__},
            "precision": spec["precision"],
            "logprobs": LOGPROBS,
            "gguf_bytes": state["file"].stat().st_size,
            "kv_unified": engine.kv_unified,
            "n_ctx": engine.sizes["n_ctx"],
        },
    )


__all__ = [
    "PACKAGES",
    "RECIPE",
    "PRECISIONS",
    "LOGPROBS",
    "run_worker",
    "sample_rows",
    "context_sizes",
    "converter_path",
]
