"""Rollout samplers: `make_sampler(backend, model, tokenizer, stop_ids=...)` returns an object with
`sync(model)` and `generate(prompt_ids, n, ...) -> Rollouts`.

Backends: "hf" (transformers generate; any architecture) and "fast" (hand-written CPU decoder for the
Llama family; falls back to "hf", with a warning, for architectures it does not support) and "remote"
(vLLM servers over HTTP; settings `urls`, `adapter_dir`; see rlvr.sampling.remote).
"""
from __future__ import annotations

from .rollouts import Rollouts, Sampler

BACKENDS = ("hf", "fast", "remote")


def make_sampler(backend: str, model, tokenizer, *, stop_ids: list[int], dtype: str = "bfloat16",
                 threads: int | None = None, **settings) -> Sampler:
    """dtype: the sampler's compute dtype ("bfloat16", "float32", "float16"); threads: torch threads
    while generating (None leaves the process setting alone); `settings` go to the remote backend
    (urls, adapter_dir, timeout_s); the local ones take none."""
    if backend == "remote":
        from .remote import RemoteSampler

        return RemoteSampler(model, tokenizer, stop_ids=stop_ids, **settings)
    if backend == "hf":
        from .hf import HFSampler

        return HFSampler(model, tokenizer, stop_ids=stop_ids, dtype=dtype, threads=threads)
    if backend == "fast":
        from .fast import make_fast_sampler

        return make_fast_sampler(model, tokenizer, stop_ids=stop_ids, dtype=dtype, threads=threads)
    raise ValueError(f"unknown sampler backend {backend!r}; choose one of {BACKENDS}")


__all__ = ["BACKENDS", "Rollouts", "Sampler", "make_sampler"]
