"""Rollout samplers: `make_sampler(backend, model, tokenizer, stop_ids=...)` returns an object with
`sync(model)` and `generate(prompt_ids, n, ...) -> Rollouts`.

Backends: "hf" (transformers generate; any architecture) and "fast" (hand-written CPU decoder for the
Llama family; falls back to "hf", with a warning, for architectures it does not support) and "remote"
(vLLM servers over HTTP; settings `urls`, `adapter_dir`; see rlvr.sampling.remote) and "vllm" (vLLM's
offline engine colocated on the trainer's GPU, `pip install "rlvr[vllm]"`; settings from `rollout.vllm`; see
rlvr.sampling.vllm). vLLM is imported only when a vLLM-backed sampler is built.
"""
from __future__ import annotations

from .rollouts import Rollouts, Sampler

BACKENDS = ("hf", "fast", "remote", "vllm")


def make_sampler(backend: str, model, tokenizer, *, stop_ids: list[int], dtype: str = "bfloat16",
                 threads: int | None = None, **settings) -> Sampler:
    """dtype: the sampler's compute dtype ("bfloat16", "float32", "float16"); threads: torch threads
    while generating (None leaves the process setting alone); `settings` go to the remote backend
    (urls, adapter_dir, timeout_s) or the vllm one (gpu_memory_utilization, enforce_eager, max_model_len,
    weight_sync); hf and fast take none. `backend_settings` reads them from the rollout config."""
    if backend == "remote":
        from .remote import RemoteSampler

        return RemoteSampler(model, tokenizer, stop_ids=stop_ids, **settings)
    if backend == "vllm":
        from .vllm import VLLMSampler

        return VLLMSampler(model, tokenizer, stop_ids=stop_ids, **{"dtype": dtype, **settings})  # rollout.vllm.dtype wins
    if backend == "hf":
        from .hf import HFSampler

        return HFSampler(model, tokenizer, stop_ids=stop_ids, dtype=dtype, threads=threads)
    if backend == "fast":
        from .fast import make_fast_sampler

        return make_fast_sampler(model, tokenizer, stop_ids=stop_ids, dtype=dtype, threads=threads)
    raise ValueError(f"unknown sampler backend {backend!r}; choose one of {BACKENDS}")


def backend_settings(rollout) -> dict:
    """The keyword settings of make_sampler for `rollout.backend`, from the rollout config section (a dict or
    the namespace of rlvr.config.as_namespace)."""
    get = rollout.get if isinstance(rollout, dict) else lambda key, default=None: getattr(rollout, key, default)
    backend = get("backend")
    if backend == "remote":
        return {"urls": list(get("urls") or []), "adapter_dir": get("adapter_dir") or None}
    if backend == "vllm":
        section = get("vllm") or {}
        return dict(section if isinstance(section, dict) else vars(section))
    return {}


__all__ = ["BACKENDS", "Rollouts", "Sampler", "backend_settings", "make_sampler"]
