"""CPU inference engines that `rlvr bench --vs ENGINE` sets beside rlvr's own sampler.

Each engine is a module here that runs only as a child process under the interpreter of the engine's own venv
(rlvr never depends on an engine). A module exports:

- `PACKAGES`: import name -> pip name, what the worker imports (probed before anything loads, so a venv that
  lacks one fails in seconds, naming it);
- `RECIPE`: the shell lines that make that venv on a clean machine (docs/performance.md prints them);
- `PRECISIONS`: the precisions it is measured at, the one closest to rlvr's bf16 first;
- `LOGPROBS`: one line on whether (and how) the engine returns the sampled tokens' log-probs;
- `run_worker(spec)`: the child, which converts rlvr's safetensors folder with the engine's own tool into
  `spec["work_dir"]`, loads it, and then calls `serve` below.

The spec (rlvr_bench.rollouts.sampler_spec) carries the prompts as token ids (P per batch, made once in the
parent through rlvr's chat template), the group size G, `max_new_tokens`, `temperature`, `top_p`, `top_k`, `seed`,
`threads`, `stop_ids`, the model folder, and for an engine worker `engine`, `precision` and `work_dir`.
"""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Callable

from rlvr_bench.child import emit

# name -> module under rlvr_bench (imported only in the child, or to read its constants)
ENGINES = {
    "vllm": "rlvr_bench.vllm",
    "llamacpp": "rlvr_bench.engines.llamacpp",
    "ct2": "rlvr_bench.engines.ct2",
    "openvino": "rlvr_bench.engines.openvino",
}


def engine_module(name: str):
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name!r}; choose from {', '.join(ENGINES)}")
    return importlib.import_module(ENGINES[name])


def serve(spec: dict, generate: Callable[[int, list[list[int]]], dict], sync: Callable[[], dict], ready: dict) -> None:
    """The worker's side of the protocol, after its model is loaded.

    Emits `ready` (with `ready`'s fields: convert_s, load_s, versions, ...), then answers the parent's lines:
    "step" runs the next batch, `generate(step, prompts) -> {"gen_tokens", "stopped", "rows", ...}` (timed here,
    around the call only: the engine's whole generate, from token ids in to token ids out), "sync" reloads the
    model as a training step would after an update, `sync() -> {"convert_s", "load_s"}` (timed here too); end of
    input ends it.
    """
    emit("ready", **ready)
    step = 0
    for line in sys.stdin:
        command = line.strip()
        if command == "step":
            t0 = time.perf_counter()
            out = generate(step, spec["prompt_ids"][step])
            emit("step", step=step, seconds=time.perf_counter() - t0, **out)
            step += 1
        elif command == "sync":
            t0 = time.perf_counter()
            out = sync()
            emit("sync", seconds=time.perf_counter() - t0, **out)
        else:
            return


def replace_model(state: dict, make: Callable, path, unload: Callable | None = None) -> float:
    """A sync's load: free the engine's old model (state["model"]) before the new one comes in, load `make(path)`,
    delete the old model's folder (state["dir"]); returns the load's seconds."""
    import gc
    import shutil

    if state.get("model") is not None:
        if unload is not None:
            unload(state["model"])
        state["model"] = None
        gc.collect()
    state["model"], seconds = timed(make, path)
    if state.get("dir") is not None:
        shutil.rmtree(state["dir"], ignore_errors=True)
    state["dir"] = path
    return seconds


def timed(f: Callable, *a, **kw):
    """(f's result, seconds)."""
    t0 = time.perf_counter()
    out = f(*a, **kw)
    return out, time.perf_counter() - t0


__all__ = ["ENGINES", "engine_module", "serve", "timed", "replace_model"]
