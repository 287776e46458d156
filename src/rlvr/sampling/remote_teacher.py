"""A distillation teacher behind `vllm serve` (distill.urls): the policy's own sampled ids, scored by the served model.

Each row is one `POST /v1/completions` with its prompt and completion ids as the prompt, `max_tokens` 1 and vLLM's
`prompt_logprobs` 0: the reply holds, for every prompt position, the log-prob of the id that stands there, under the
served model. The completion's positions are the teacher's log-probs of the student's tokens. Rows go round robin
over the live servers, several in flight; a server that is lost is said once and its rows go to the others, as the
remote sampler's do (rlvr.sampling.remote).

vLLM computes prompt log-probs from the raw logits, so this teacher speaks at temperature 1: rlvr.training.teacher
refuses it at another rollout.temperature. Before the first step each server is checked: it must list the model named
by distill.teacher and tokenize a probe text as the policy's tokenizer does; else one line (ServerMismatch, exit 2).
"""

from __future__ import annotations

import threading
import urllib.request
import warnings
from concurrent.futures import ThreadPoolExecutor

import torch

from rlvr.algorithms.step_batch import StepBatch

from .remote import REQUESTS_PER_SERVER, RemoteError, ServerLost, ServerMismatch, _send, post_json

PROBE = "Teacher check: 12 + 30 = 42, naïve café, 東京."


class RemoteTeacher:
    """The model `name` as the servers at `urls` serve it, scoring token ids (see the module docstring)."""

    def __init__(self, urls: list[str], name: str, tokenizer, *, timeout_s: float = 60.0):
        if not urls or not all(isinstance(u, str) and u.startswith(("http://", "https://")) for u in urls):
            raise ValueError(f"distill.urls = {urls!r}: need one or more server addresses like http://host:8000")
        self.urls, self.name, self.timeout_s, self.label = list(urls), name, timeout_s, name
        self.lost: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        ours = tokenizer(PROBE, add_special_tokens=False)["input_ids"]
        for url in self.live:
            self._check(url, ours)

    @property
    def live(self) -> list[str]:
        gone = {u for u, _ in self.lost}
        return [u for u in self.urls if u not in gone]

    def _lose(self, url: str, why: str) -> None:
        with self._lock:
            if url in self.live:
                self.lost.append((url, why))
                warnings.warn(
                    f"teacher server {url} lost ({why}); its rows go to the {len(self.live)} server(s) left",
                    RuntimeWarning,
                    stacklevel=2,
                )
        if not self.live:
            raise RemoteError(f"every teacher server is lost: {self.lost}")

    def _check(self, url: str, ours: list[int]) -> None:
        """The server serves `name` and tokenizes as the policy does, or ServerMismatch; unreachable: lost."""
        try:
            models = [
                m["id"] for m in _send(urllib.request.Request(url.rstrip("/") + "/v1/models"), self.timeout_s)["data"]
            ]
            if self.name not in models:
                raise ServerMismatch(
                    f"teacher server {url} serves {', '.join(models) or 'nothing'}, not distill.teacher = {self.name}"
                )
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
        while True:
            live = self.live
            url = live[i % len(live)]
            try:
                reply = post_json(url, "/v1/completions", body, self.timeout_s)
                return completion_logprobs(reply, ids, len(prompt))
            except ServerLost as e:
                self._lose(url, str(e))


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
