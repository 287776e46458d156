"""A distillation teacher behind `vllm serve` (distill.urls): the policy's own sampled ids, scored by the served model.

Each row is one `POST /v1/completions` with its prompt and completion ids as the prompt, `max_tokens` 1 and vLLM's
`prompt_logprobs` 0: the reply holds, for every prompt position but the first (None), the log-prob of the id that
stands there, under the served model. The completion's positions are the teacher's log-probs of the student's tokens.
Rows go round robin over the live servers, several in flight; a server that is lost is said once and its rows go to
the others, as the remote sampler's do (rlvr.sampling.remote).

vLLM computes prompt log-probs from the raw logits (whatever the request's temperature or `--logprobs-mode`), so this
teacher speaks at temperature 1: rlvr.training.teacher refuses it at another rollout.temperature. Before the first
step each server is checked: it must list the model named by distill.teacher and tokenize a probe text as the
policy's tokenizer does; else one line (ServerMismatch, exit 2).

What vLLM 0.32's server (CPU build, met in the engines tier) asks of a teacher's:
- no `--enable-lora`: with it, two prompt_logprobs requests in one engine step kill the engine (its CPU LoRA logits
  path maps one adapter index per request onto one row per prompt token: an einsum error, then HTTP 500 for every
  request). A teacher serves a base model and needs no adapters; when every server is lost to HTTP 500 the error
  says so;
- `max_tokens` 1, not 0 (refused: HTTP 400), so a row needs one position more than its prompt and completion: a row
  that fills the server's `--max-model-len` (listed at /v1/models) is refused here, naming the flag.
"""

from __future__ import annotations

import urllib.request
from concurrent.futures import ThreadPoolExecutor

import torch

from rlvr.algorithms.step_batch import StepBatch

from .remote import REQUESTS_PER_SERVER, RemoteError, ServerLost, ServerMismatch, ServerPool, _send, post_json

PROBE = "Teacher check: 12 + 30 = 42, naïve café, 東京."
LORA_HINT = (
    " (a vLLM server started with --enable-lora dies on concurrent prompt_logprobs requests: serve the teacher "
    "without it)"
)


class RemoteTeacher(ServerPool):
    """The model `name` as the servers at `urls` serve it, scoring token ids (see the module docstring)."""

    role, work = "teacher server", "rows"

    def __init__(self, urls: list[str], name: str, tokenizer, *, timeout_s: float = 60.0):
        super().__init__(urls, "distill.urls")
        self.name, self.timeout_s, self.label = name, timeout_s, name
        self.max_len: dict[str, int] = {}  # each server's --max-model-len, as its /v1/models lists it (0: not said)
        ours = tokenizer(PROBE, add_special_tokens=False)["input_ids"]
        for url in self.live:
            self._check(url, ours)

    def _all_lost_hint(self) -> str:
        return LORA_HINT if any("HTTP 500" in why for _, why in self.lost) else ""

    def _check(self, url: str, ours: list[int]) -> None:
        """The server serves `name` and tokenizes as the policy does, or ServerMismatch; unreachable: lost."""
        try:
            listed = _send(urllib.request.Request(url.rstrip("/") + "/v1/models"), self.timeout_s)["data"]
            models = [m["id"] for m in listed]
            if self.name not in models:
                raise ServerMismatch(
                    f"teacher server {url} serves {', '.join(models) or 'nothing'}, not distill.teacher = {self.name}"
                )
            self.max_len[url] = next(m for m in listed if m["id"] == self.name).get("max_model_len") or 0
            body = {"model": self.name, "prompt": PROBE, "add_special_tokens": False}
            theirs = post_json(url, "/tokenize", body, self.timeout_s).get("tokens")
        except ServerLost as e:
            self._lose(url, f"while checking it: {e}")
            return
        if theirs != ours:
            raise ServerMismatch(
                f"teacher server {url}: {self.name} tokenizes {PROBE!r} as {theirs}, the policy's tokenizer as "
                f"{ours}; the teacher must share the student's tokenizer (cross-tokenizer distillation is not supported)"
            )

    def logprobs(self, batch: StepBatch, s) -> torch.Tensor:
        """(B, T) float32: the served model's log-probs of each row's completion ids, 0 off the mask."""
        out = torch.zeros_like(batch.sampler_logp, dtype=torch.float32)
        rows = [r for r in range(len(batch)) if batch.mask[r].sum() > 0]
        workers = max(1, min(len(rows), REQUESTS_PER_SERVER * len(self.live)))
        with ThreadPoolExecutor(workers) as pool:
            scored = list(pool.map(lambda i: self._row(i, batch, rows[i]), range(len(rows))))
        for r, logps in zip(rows, scored):
            out[r, : len(logps)] = torch.tensor(logps)
        return torch.where(batch.mask > 0, out, torch.zeros_like(out))

    def _row(self, i: int, batch: StepBatch, r: int) -> list[float]:
        """Row r (the i-th asked) on server i mod live, then on the next live one each time one is lost."""
        prompt, n = list(batch.prompt_ids[r]), int(batch.lengths[r])
        ids = prompt + batch.completion_ids[r, :n].tolist()
        body = {"model": self.name, "prompt": ids, "max_tokens": 1, "temperature": 1.0, "prompt_logprobs": 0}

        def score(url: str) -> list[float]:
            limit = self.max_len.get(url, 0)
            if limit and len(ids) >= limit:  # vLLM would answer 400: "max_tokens must be at least 1, got 0"
                raise RemoteError(
                    f"teacher server {url} holds {limit} positions (--max-model-len); a row of {len(ids)} prompt and "
                    f"completion tokens needs {len(ids) + 1}: start it with a larger --max-model-len"
                )
            return completion_logprobs(post_json(url, "/v1/completions", body, self.timeout_s), ids, len(prompt))

        return self._on_live(i, score)


def completion_logprobs(reply: dict, ids: list[int], start: int) -> list[float]:
    """The log-probs vLLM's `prompt_logprobs` gave ids[start:] (each position's entry holds the id that stands there,
    keyed by the id as a string), from a /v1/completions reply."""
    choices = reply.get("choices") or [{}]
    entries = choices[0].get("prompt_logprobs")
    if not isinstance(entries, list) or len(entries) != len(ids):
        raise ServerLost(f"expected prompt_logprobs for {len(ids)} positions, got {type(entries).__name__}")
    out = []
    for pos in range(start, len(ids)):
        entry = (entries[pos] or {}).get(str(ids[pos]))
        if entry is None:
            raise ServerLost(f"prompt_logprobs at position {pos} lacks the id {ids[pos]} that stands there")
        out.append(float(entry["logprob"] if isinstance(entry, dict) else entry))
    return out


__all__ = ["RemoteTeacher", "completion_logprobs", "PROBE"]
