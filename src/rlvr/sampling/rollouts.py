"""The rollout batch every sampler backend returns, and the padding/stop bookkeeping they share.

Shapes: P prompts, G samples each, B = P * G rows in prompt-major order (row = p * G + g), T completion
positions (the longest completion in the batch, at most max_new_tokens).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

import torch


@dataclass
class Rollouts:
    prompt_ids: list[list[int]]  # P prompts, token ids, chat template already applied
    completion_ids: torch.Tensor  # (B, T) long, right-padded with pad_id
    mask: torch.Tensor  # (B, T) float, 1.0 on sampled tokens (stop token included), 0 on padding
    sampler_logp: torch.Tensor  # (B, T) float32, log-prob under softmax(logits / temperature); 0 on padding
    group_ids: torch.Tensor  # (B,) long, prompt index 0..P-1
    finish: list[str]  # "stop" | "length" per row
    texts: list[str]  # decoded completions, special tokens skipped
    num_generated_tokens: int = 0  # sum of mask
    num_prompt_tokens: int = 0  # prompt tokens run through the model (once per prompt when shared)
    seconds: float = 0.0  # wall time of generate()
    timings: dict[str, float] = field(default_factory=dict)  # backend-specific phases, seconds

    @property
    def tokens_per_second(self) -> float:
        return self.num_generated_tokens / self.seconds if self.seconds > 0 else 0.0


DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}


class Sampler(Protocol):
    def sync(self, model) -> None:
        """Take the current policy weights (a transformers model or a peft model; LoRA merged)."""

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
        """Sample n completions per prompt; temperature 0 means greedy."""


def pad_id_for(tokenizer, stop_ids: list[int]) -> int:
    """The id completions are right-padded with: the tokenizer's pad token, else the first stop id."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stop_ids[0]


def cut_at_stop(tokens: list[int], stop_ids: set[int]) -> tuple[list[int], str]:
    """Keep tokens up to and including the first stop id; finish is "stop" if one was found, else "length"."""
    for i, tok in enumerate(tokens):
        if tok in stop_ids:
            return tokens[: i + 1], "stop"
    return tokens, "length"


def pack_rollouts(
    prompt_ids: list[list[int]],
    n: int,
    rows: list[list[int]],
    logps: list[list[float]] | list[torch.Tensor],
    finish: list[str],
    pad_id: int,
    tokenizer,
) -> Rollouts:
    """Right-pad B variable-length completions (already cut at their stop) into a Rollouts batch.

    rows[b] and logps[b] have the same length L_b; T = max L_b (at least 1 so tensors are never empty).
    """
    B = len(rows)
    T = max([len(r) for r in rows] + [1])
    ids = torch.full((B, T), pad_id, dtype=torch.long)
    mask = torch.zeros(B, T)
    logp = torch.zeros(B, T, dtype=torch.float32)
    for b, (r, lp) in enumerate(zip(rows, logps)):
        if r:
            ids[b, : len(r)] = torch.tensor(r, dtype=torch.long)
            mask[b, : len(r)] = 1.0
            logp[b, : len(r)] = torch.as_tensor(lp, dtype=torch.float32)
    texts = tokenizer.batch_decode(rows, skip_special_tokens=True) if tokenizer is not None else [""] * B
    return Rollouts(
        prompt_ids=[list(p) for p in prompt_ids],
        completion_ids=ids,
        mask=mask,
        sampler_logp=logp,
        group_ids=torch.arange(len(prompt_ids)).repeat_interleave(n),
        finish=list(finish),
        texts=texts,
        num_generated_tokens=int(mask.sum().item()),
    )


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with n torch threads (None: leave the setting alone), restoring it afterwards.

    On this 2-core machine shared with other jobs, 1 thread was far faster than 2 for decode-sized ops
    (each 2-thread op waited ~5 ms for its descheduled partner); on an idle machine 2 threads win.
    """
    old = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n:
            torch.set_num_threads(old)


class LocalSampler:
    """What the in-process backends share: settings, pad id, and generate() running the backend's
    `_generate(prompt_ids, n, max_new_tokens, temperature, top_p, top_k, generator)` with the sampler's
    thread count and without autograd."""

    def __init__(self, tokenizer, *, stop_ids: list[int], dtype: str = "bfloat16", threads: int | None = None):
        self.threads = threads
        self.tokenizer = tokenizer
        self.stop_ids = list(stop_ids)
        self.pad_id = pad_id_for(tokenizer, self.stop_ids)
        self.dtype = DTYPES[dtype]

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
        with torch_threads(self.threads), torch.inference_mode():
            return self._generate(prompt_ids, n, max_new_tokens, temperature, top_p, top_k, generator)

    def _generate(
        self,
        prompt_ids: list[list[int]],
        n: int,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        top_k: int,
        generator: torch.Generator | None,
    ) -> Rollouts:
        raise NotImplementedError  # each backend's own sampling
