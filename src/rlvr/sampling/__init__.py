"""Rollouts: the policy samples G completions for each of P prompts. Every backend returns the same `Rollouts`.

    build_sampler(rollout, model, tokenizer)  -> a sampler with `sync(model)` and
    sampler.generate(prompt_ids (P,), n=G, ...) -> Rollouts (completion_ids (B, T), mask, sampler_logp, ...)

Backends, by name (`BACKENDS`, the registry): "hf" (transformers generate; any architecture), "fast" (hand-written
CPU decoder for the families of rlvr.sampling.families; falls back to "hf", with a warning saying why, for others),
"remote" (vLLM servers over HTTP; settings `urls`, `adapter_dir`; rlvr.sampling.remote) and "vllm" (vLLM's offline
engine colocated on the trainer's GPU, `pip install "rlvr[vllm]"`; settings from `rollout.vllm`;
rlvr.sampling.vllm). A backend's module is imported only when a sampler of it is built.

In: the policy (its weights are copied or pushed at `sync`), prompt token ids. Out: Rollouts.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlvr.machine import EMULATED_BF16, auto_dtype, emulates_bf16
from rlvr.prompts.chat import plain_stop_ids
from rlvr.registry import Registry

from .rollouts import Rollouts, Sampler


def _hf(model, tokenizer, stop_ids, dtype, threads, settings):
    from .hf import HFSampler

    return HFSampler(model, tokenizer, stop_ids=stop_ids, dtype=dtype, threads=threads)


def _fast(model, tokenizer, stop_ids, dtype, threads, settings):
    from .fast import make_fast_sampler

    return make_fast_sampler(model, tokenizer, stop_ids=stop_ids, dtype=dtype, threads=threads)


def _remote(model, tokenizer, stop_ids, dtype, threads, settings):
    from .remote import RemoteSampler

    return RemoteSampler(model, tokenizer, stop_ids=stop_ids, **settings)


def _vllm(model, tokenizer, stop_ids, dtype, threads, settings):
    from .vllm import VLLMSampler

    # the engine's dtype is rollout.vllm.dtype (vLLM's own "auto" included), not the local samplers' rollout.dtype
    return VLLMSampler(model, tokenizer, stop_ids=stop_ids, dtype=settings.pop("engine_dtype", dtype), **settings)


def _no_settings(get) -> dict:
    return {}


def _remote_settings(get) -> dict:
    # the temperature makes the sampler check, before the first step, that each server samples this policy
    return {
        "urls": list(get("urls") or []),
        "adapter_dir": get("adapter_dir") or None,
        "temperature": get("temperature"),
    }


def _vllm_settings(get) -> dict:
    section = get("vllm") or {}
    settings = dict(section) if isinstance(section, dict) else dataclasses.asdict(section)
    if "dtype" in settings:  # make_sampler's own `dtype` is rollout.dtype: a second keyword of that name collides
        settings["engine_dtype"] = settings.pop("dtype")
    return settings


@dataclass(frozen=True)
class Backend:
    """A sampler backend: what builds it and what its callers need to know about it.

    make(model, tokenizer, stop_ids, dtype, threads, settings) -> Sampler;
    settings(get) -> its own keywords for make_sampler, `get(key, default=None)` reading the rollout section;
    local_cpu: it computes in this process on this machine's CPU at rollout.dtype (so an emulated bf16 is slow);
    adapter_on_servers: its servers hold the base model and the policy reaches them as a LoRA adapter pushed by
    `sync` (a run directory is evaluated as its adapter on that base, pushed once before sampling).
    """

    make: Callable
    settings: Callable[[Callable], dict] = _no_settings
    local_cpu: bool = False
    adapter_on_servers: bool = False


def _plugin_backend(obj, name: str) -> Backend:
    """A user's backend: a Backend as it is, or a bare maker (no settings of its own, nothing assumed of it)."""
    return obj if isinstance(obj, Backend) else Backend(obj)


# name -> Backend; a new backend is a new entry, or `rollout.backend: package.module:attr` naming a maker of the
# user's (or a Backend)
BACKENDS: Registry[Backend] = Registry("sampler backend", key="rollout.backend", plugin=_plugin_backend)
BACKENDS.add("hf", Backend(_hf, local_cpu=True), "transformers generate: any architecture")
BACKENDS.add(
    "fast",
    Backend(_fast, local_cpu=True),
    "rlvr's CPU decoder (Llama, Mistral, Qwen2, Qwen3, SmolLM3, Gemma 3): shared prompt cache, native ops",
)
BACKENDS.add(
    "remote",
    Backend(_remote, _remote_settings, adapter_on_servers=True),
    "vLLM servers over HTTP, the LoRA adapter pushed each step",
)
BACKENDS.add("vllm", Backend(_vllm, _vllm_settings), "vLLM's engine on the trainer's GPU (extra rlvr[vllm])")


def make_sampler(
    backend: str,
    model,
    tokenizer,
    *,
    stop_ids: list[int],
    dtype: str = "bfloat16",
    threads: int | None = None,
    **settings,
) -> Sampler:
    """dtype: the sampler's compute dtype ("bfloat16", "float32", "float16"); threads: torch threads
    while generating (None leaves the process setting alone); `settings` go to the remote backend
    (urls, adapter_dir, timeout_s) or the vllm one (gpu_memory_utilization, enforce_eager, max_model_len,
    weight_sync); hf and fast take none. Use `build_sampler` to build one from the rollout config."""
    return BACKENDS.get(backend).make(model, tokenizer, stop_ids, dtype, threads, settings)


def stop_ids(config, tokenizer, prompt_format: str = "chat") -> list[int]:
    """Token ids that end a completion: the tokenizer's eos and the model config's (an int or a list); in the plain
    prompt format also the token that starts a next `User:` line (rlvr.prompts.chat.plain_stop_ids)."""
    eos = getattr(config, "eos_token_id", None)
    turn = plain_stop_ids(tokenizer) if prompt_format == "plain" else []
    return sorted({tokenizer.eos_token_id, *([eos] if isinstance(eos, int) else eos or []), *turn} - {None})


def backend_settings(rollout) -> dict:
    """The keyword settings of make_sampler for `rollout.backend`, from the rollout config section (the
    typed `RolloutConfig`, or its dict)."""
    get: Callable[..., Any] = (
        rollout.get if isinstance(rollout, dict) else lambda key, default=None: getattr(rollout, key, default)
    )
    return BACKENDS.get(get("backend")).settings(get)


def draw_settings(rollout) -> dict:
    """How a training draw samples, as `sampler.generate` keywords, from the rollout config section: the one place
    the RL round, an episode's turns and the SFT baseline's rejection sampling take them from, so they draw alike."""
    return {
        "max_new_tokens": rollout.max_new_tokens,
        "temperature": rollout.temperature,
        "top_p": rollout.top_p,
        "top_k": rollout.top_k,
    }


def build_sampler(
    rollout,
    model,
    tokenizer,
    *,
    backend: str | None = None,
    threads: int | None = None,
    prompt_format: str = "chat",
) -> Sampler:
    """The one way to build a sampler from the rollout settings: stop ids worked out here (for the prompt format the
    prompts are in: "chat" or "plain", rlvr.prompts.chat.prompt_format), the backend's own settings (remote urls,
    vLLM's engine) always passed. `backend` overrides `rollout.backend` (evaluation of a run's checkpoint may sample
    with another one); its settings still come from `rollout`."""
    settings = backend_settings(rollout if backend is None else _with_backend(rollout, backend))
    name = backend or (rollout["backend"] if isinstance(rollout, dict) else rollout.backend)
    dtype = auto_dtype(rollout["dtype"] if isinstance(rollout, dict) else rollout.dtype, "float32")
    sampler = make_sampler(
        name,
        model,
        tokenizer,
        stop_ids=stop_ids(model.config, tokenizer, prompt_format),
        dtype=dtype,
        threads=threads,
        **settings,
    )
    if emulates_bf16(dtype, samples_on_cpu(sampler, name)):
        warnings.warn(EMULATED_BF16.format(what="rollout.dtype"), stacklevel=2)
    return sampler


def samples_on_cpu(sampler: Sampler, backend: str) -> bool:
    """Whether `sampler` (of the backend named) computes on this machine's CPU: a local backend's, unless it put its
    copy on the policy's GPU (hf, model.device: cuda)."""
    device = getattr(sampler, "device", None)
    return BACKENDS.get(backend).local_cpu and (device is None or device.type == "cpu")


def _with_backend(rollout, backend: str):
    return (
        {**rollout, "backend": backend} if isinstance(rollout, dict) else dataclasses.replace(rollout, backend=backend)
    )


__all__ = [
    "BACKENDS",
    "Backend",
    "Rollouts",
    "Sampler",
    "backend_settings",
    "build_sampler",
    "draw_settings",
    "make_sampler",
    "samples_on_cpu",
    "stop_ids",
]
