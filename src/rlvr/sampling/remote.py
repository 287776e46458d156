"""Backend "remote": rollouts from N vLLM servers over their OpenAI-compatible HTTP API (standard library only).

Each prompt is one `POST /v1/completions` request with the prompt as token ids, `n` samples and `logprobs`;
prompts go round-robin over the live servers, several in flight at once. A server that refuses, drops the
connection, times out or answers 5xx/404 is reported (a warning, and `sampler.lost`) and its prompts are
retried on the next live one; the batch fails only when no server is left. Rows come back in the same
`Rollouts` layout as the local backends.

Weights: after each update the trainer calls `sync`, which saves the LoRA adapter to `adapter_dir` (a folder
every server can read) and loads it on every server under a new name (`POST /v1/load_lora_adapter`), then
unloads the previous one; requests name the newest adapter. Full fine-tuning would need vLLM's weight-update
path (weights sent over NCCL from the trainer), which this backend does not implement: it refuses a model
without a LoRA adapter. Launch recipe and caveats: docs/scaling.md.

Contract gaps to know (docs/scaling.md): the servers' log-probs must be taken after temperature (vLLM
`--logprobs-mode processed_logprobs`) to match `Rollouts.sampler_logp`; with one update per batch they
feed the entropy metric and the sampler-vs-trainer figures (`mismatch/*`), which show a server that sends raw
log-probs as a large k3 KL. Seeds are sent per request, but a server's samples are not bit-identical to ours.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import threading
import time
import urllib.error
import urllib.request
import warnings
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import torch

from rlvr.errors import ConfigError
from rlvr.policy.load import base_model, model_device, save_adapter

from .rollouts import Rollouts, cut_at_stop, pack_rollouts, pad_id_for

# In-flight requests per live server: vLLM batches concurrent requests itself, so a few keep it busy.
REQUESTS_PER_SERVER = 8
ADAPTER_PREFIX = "rlvr-policy"
T = TypeVar("T")


class RemoteError(RuntimeError):
    """Rollouts cannot be had: every server is lost, or a server rejected the request itself (HTTP 400)."""


class ServerMismatch(RemoteError, ConfigError):
    """A server that answers but would train the policy wrong (another model, untempered log-probs): a setup
    mistake, refused before the first step (exit 2 from the CLI)."""


class ServerLost(ConnectionError):
    """One server did not answer usefully; its work can go elsewhere."""


def post_json(url: str, path: str, body: dict, timeout_s: float) -> dict:
    """POST JSON, return the decoded reply. Connection trouble, timeouts, 5xx and 404 (a server that lacks
    the model or adapter asked for) raise ServerLost; 400/422 (our request is wrong) raise RemoteError."""
    req = urllib.request.Request(
        url.rstrip("/") + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    return _send(req, timeout_s)


def _send(req, timeout_s: float) -> dict:
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as e:
        detail = e.read()[:300].decode(errors="replace")
        if e.code in (400, 422):
            raise RemoteError(f"{req.full_url}: HTTP {e.code}: {detail}") from None
        raise ServerLost(f"HTTP {e.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as e:  # refused, reset, timed out, closed mid-reply
        raise ServerLost(f"{type(e).__name__}: {getattr(e, 'reason', e)}") from None
    try:
        return json.loads(raw) if raw else {}
    except ValueError:  # vLLM answers its LoRA endpoints in plain text ("Success: LoRA adapter ... added ...")
        return {"text": raw.decode(errors="replace")}


def completion_body(
    model: str,
    prompt: list[int],
    n: int,
    *,
    max_new_tokens: int,
    temperature: float,
    top_p: float,
    top_k: int,
    seed: int,
    stop_ids: list[int],
) -> dict:
    """One vLLM /v1/completions request: token-id prompt, n samples, the sampled token's log-prob."""
    return {
        "model": model,
        "prompt": list(prompt),
        "n": n,
        "max_tokens": max_new_tokens,
        "temperature": temperature,
        "top_p": top_p,
        "top_k": top_k if top_k > 0 else -1,
        "seed": seed,
        "logprobs": 0,
        "stop_token_ids": list(stop_ids),
        "return_tokens_as_token_ids": True,
        "skip_special_tokens": False,
    }


def parse_choices(reply: dict, n: int) -> list[tuple[list[int], list[float], str]]:
    """(token ids, log-probs, finish) for each of the n choices, in index order."""
    choices = sorted(reply.get("choices", []), key=lambda c: c.get("index", 0))
    if len(choices) != n:
        raise ServerLost(f"expected {n} choices, got {len(choices)}")
    out = []
    for c in choices:
        lp = c.get("logprobs") or {}
        tokens = [_token_id(t) for t in lp.get("tokens", [])]
        logps = [float(x) if x is not None else 0.0 for x in lp.get("token_logprobs", [])]
        if len(tokens) != len(logps):
            raise ServerLost("token and log-prob lists differ in length")
        out.append((tokens, logps, c.get("finish_reason") or "length"))
    return out


def _token_id(token: str) -> int:
    # vLLM spells tokens as "token_id:123" when asked for return_tokens_as_token_ids
    if not isinstance(token, str) or not token.startswith("token_id:"):
        raise RemoteError(f"server returned token {token!r}, not an id: start vLLM with --return-tokens-as-token-ids")
    return int(token.split(":", 1)[1])


class ServerPool:
    """Servers by address, each lost at most once and said so, its work going to the rest: what the remote sampler
    and a served distillation teacher (rlvr.sampling.remote_teacher) share. `role` names a server in those lines,
    `work` what goes elsewhere; `setting` is the config key the addresses come from."""

    role, work = "server", "work"

    def __init__(self, urls: list[str], setting: str):
        if not urls or not all(isinstance(u, str) and u.startswith(("http://", "https://")) for u in urls):
            raise ValueError(f"{setting} = {urls!r}: need one or more server addresses like http://host:8000")
        self.urls, self.lost = list(urls), list[tuple[str, str]]()  # lost: [(url, reason)] in the order lost
        self._lock = threading.Lock()

    @property
    def live(self) -> list[str]:
        gone = {u for u, _ in self.lost}
        return [u for u in self.urls if u not in gone]

    def _lose(self, url: str, why: str) -> None:
        with self._lock:
            if url in self.live:
                self.lost.append((url, why))
                warnings.warn(
                    f"{self.role} {url} lost ({why}); its {self.work} go to the {len(self.live)} server(s) left",
                    RuntimeWarning,
                    stacklevel=3,
                )
        if not self.live:
            raise RemoteError(f"every {self.role} is lost: {self.lost}{self._all_lost_hint()}")

    def _all_lost_hint(self) -> str:
        """What to add when the last server is lost (a subclass's knowledge of why servers die)."""
        return ""

    def _on_live(self, i: int, call: Callable[[str], T]) -> T:
        """call(url) for the i-th request on server i mod live, then on the next live one each time one is lost."""
        while True:
            live = self.live
            url = live[i % len(live)]
            try:
                return call(url)
            except ServerLost as e:
                self._lose(url, str(e))


class RemoteSampler(ServerPool):
    """`Sampler` over vLLM servers. `shared = True`: the servers serve every rank, so only one pushes.

    The servers hold a base model; the policy reaches them as LoRA adapters pushed at each `sync`. A model
    without an adapter is sampled as the servers' own base model (what they list first at /v1/models), which is
    right for the model they serve (a starting model's evaluation, SFT's sampling) and cannot be trained.
    """

    shared = True
    role, work = "rollout server", "prompts"

    def __init__(
        self,
        model,
        tokenizer,
        *,
        stop_ids: list[int],
        urls: list[str],
        adapter_dir: str | None = None,
        timeout_s: float = 600.0,
        temperature: float | None = None,
        **_local_only,
    ):
        super().__init__(urls, "rollout.urls")
        self.base_only = not _has_adapter(model)  # sample the servers' base model; no sync
        self.tokenizer, self.stop_ids, self.timeout_s = tokenizer, list(stop_ids), timeout_s
        self.pad_id = pad_id_for(tokenizer, self.stop_ids)
        self.adapter_dir = Path(adapter_dir or tempfile.mkdtemp(prefix="rlvr-adapters-"))
        if adapter_dir is None:  # a temporary folder works when the servers share this machine; removed with us
            weakref.finalize(self, shutil.rmtree, str(self.adapter_dir), True)
        self.version, self._base_name = 0, None
        if temperature:  # training (not greedy): each server must serve this base model, log-probs as ours
            for url in self.live:
                check_server(self, url, model, temperature)

    def served_base(self) -> str:
        """The base model's name as the first live server lists it (vLLM lists it before any adapter)."""
        if self._base_name is None:
            for url in self.live:
                try:
                    models = _send(urllib.request.Request(url.rstrip("/") + "/v1/models"), self.timeout_s)["data"]
                    self._base_name = next(m["id"] for m in models if not m.get("parent"))
                    break
                except ServerLost as e:
                    self._lose(url, f"while listing its models: {e}")
        if self._base_name is None:  # unreachable: losing the last server raised in _lose
            raise RemoteError(f"no rollout server listed its models: {self.lost}")
        return self._base_name

    @property
    def adapter_name(self) -> str:
        return f"{ADAPTER_PREFIX}-{self.version}"

    def sync(self, model, push: bool = True, state_dict: dict | None = None) -> None:
        """Serve the current adapter under a new name; with push=False (other ranks) only follow the name.
        state_dict: the adapter's whole tensors when the model is sharded (FSDP), gathered by the caller."""
        if not _has_adapter(model):
            raise ValueError(
                "the remote backend pushes LoRA adapters after each step; a full fine-tune would need "
                "vLLM's weight-update API (weights over NCCL), which rlvr does not implement: "
                "enable model.lora or use a local backend"
            )
        old = self.adapter_name
        self.version += 1
        if not push:
            return
        path = self.adapter_dir / self.adapter_name
        save_adapter(model, path, state_dict)
        for url in self.live:
            try:
                post_json(
                    url,
                    "/v1/load_lora_adapter",
                    # in place: a resumed run, or a restarted trainer, pushes names a server may still hold
                    {"lora_name": self.adapter_name, "lora_path": str(path), "load_inplace": True},
                    self.timeout_s,
                )
            except ServerLost as e:
                self._lose(url, f"while loading the adapter: {e}")
        for url in self.live if self.version > 1 else []:
            try:  # free the server's adapter slot; a failure here costs nothing but memory
                post_json(url, "/v1/unload_lora_adapter", {"lora_name": old}, self.timeout_s)
            except (ServerLost, RemoteError):
                pass
        shutil.rmtree(self.adapter_dir / old, ignore_errors=True)

    def _complete(self, i: int, body: dict):
        """Prompt i's choices, from the pool's i-th live server (failing over as servers are lost)."""
        return self._on_live(
            i, lambda url: parse_choices(post_json(url, "/v1/completions", body, self.timeout_s), body["n"])
        )

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
        t0 = time.perf_counter()
        if self.version == 0 and not self.base_only:
            raise RemoteError("call sync(model) before generate: the servers do not hold the policy yet")
        model_name = self.served_base() if self.base_only else self.adapter_name
        base = int(torch.randint(0, 2**31 - len(prompt_ids), (1,), generator=generator))
        bodies = [
            completion_body(
                model_name,
                p,
                n,
                max_new_tokens=max_new_tokens,
                temperature=temperature,
                top_p=top_p,
                top_k=top_k,
                seed=base + i,
                stop_ids=self.stop_ids,
            )
            for i, p in enumerate(prompt_ids)
        ]
        workers = max(1, min(len(bodies), REQUESTS_PER_SERVER * len(self.live)))
        with ThreadPoolExecutor(workers) as pool:
            replies = list(pool.map(self._complete, range(len(bodies)), bodies))
        rows, logps, finish = [], [], []
        stops = set(self.stop_ids)
        for choices in replies:
            for tokens, lps, why in choices:
                kept, cut = cut_at_stop(tokens[:max_new_tokens], stops)
                rows.append(kept)
                logps.append(lps[: len(kept)])
                finish.append("stop" if cut == "stop" or why == "stop" else "length")
        ro = pack_rollouts(prompt_ids, n, rows, logps, finish, self.pad_id, self.tokenizer)
        ro.num_prompt_tokens = sum(len(p) for p in prompt_ids)  # the server prefills each prompt once
        ro.seconds = time.perf_counter() - t0
        return ro


# A server passes the check when its log-probs of the tokens it sampled are the trainer's within this mean (nats per
# token). Measured here on SmolLM2-135M, 16 tokens: a bf16 server against the float32 trainer 0.04 at temperature 1,
# 0.09 at 0.7; a float32 server sending untempered log-probs at 0.7: 0.15 (and 0.00 against untempered ones).
PROBE_TOLERANCE = 0.5
PROBE_TEXT = "Question: What is 12 + 30? Answer: 12 + 30 ="
PROBE_TOKENS = 16


def check_server(sampler: RemoteSampler, url: str, model, temperature: float) -> None:
    """Refuse (ServerMismatch, one line, exit 2 from the CLI) a live server that would train the policy wrong: one that does not serve this
    policy's base model, or sends log-probs of another temperature than the one sampled at (vLLM's default
    `--logprobs-mode raw_logprobs`). It samples PROBE_TOKENS tokens from the base model; the trainer scores them with
    its adapter off. A server that does not answer is lost as in a batch (checked: rlvr.sampling.remote tests)."""
    ids = sampler.tokenizer(PROBE_TEXT)["input_ids"]
    body = completion_body(
        sampler.served_base(),
        ids,
        1,
        max_new_tokens=PROBE_TOKENS,
        temperature=max(temperature, 1e-3),
        top_p=1.0,
        top_k=0,
        seed=0,
        stop_ids=[],
    )
    body["ignore_eos"] = True  # all PROBE_TOKENS tokens, however soon the model would stop
    try:
        ((tokens, served, _),) = parse_choices(post_json(url, "/v1/completions", body, sampler.timeout_s), 1)
    except ServerLost as e:
        sampler._lose(url, f"while checking its model: {e}")
        return
    ours, raw = _trainer_logprobs(model, ids, tokens, temperature)
    gap = sum(abs(a - b) for a, b in zip(served, ours)) / max(len(tokens), 1)
    gap_raw = sum(abs(a - b) for a, b in zip(served, raw)) / max(len(tokens), 1)
    name = getattr(base_model(model), "name_or_path", "") or "the policy's base model"
    if gap > 2 * gap_raw and gap > 0.1:  # the untempered logits explain its log-probs better than ours do
        why = "its log-probs are of the untempered logits: start it with --logprobs-mode processed_logprobs"
    elif gap > PROBE_TOLERANCE:
        why = f"it does not serve this policy's base model: serve {name}"
    else:
        return
    raise ServerMismatch(
        f"rollout server {url}: {why} (mean |log-prob difference| {gap:.2f} nats over {len(tokens)} sampled tokens "
        f"at temperature {temperature}; against untempered log-probs: {gap_raw:.2f})"
    )


def _trainer_logprobs(model, prompt: list[int], tokens: list[int], temperature: float) -> tuple[list, list]:
    """The base model's log-probs of `tokens` after `prompt`, at `temperature` and untempered (adapter off)."""
    off = model.disable_adapter() if hasattr(model, "disable_adapter") else contextlib.nullcontext()
    ids = torch.tensor([list(prompt) + list(tokens)], device=model_device(model))
    with torch.no_grad(), off:
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float().cpu()
    pick = torch.tensor(tokens)[:, None]
    at_t = (logits / max(temperature, 1e-3)).log_softmax(-1).gather(-1, pick)[:, 0]
    return at_t.tolist(), logits.log_softmax(-1).gather(-1, pick)[:, 0].tolist()


def _has_adapter(model) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "save_pretrained")


__all__ = ["RemoteSampler", "RemoteError", "ServerLost", "ServerMismatch", "completion_body", "parse_choices"]
