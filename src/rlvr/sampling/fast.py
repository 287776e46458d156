"""Backend "fast": prefill each prompt once, share its KV cache across its G samples, decode with a
hand-written forward for the Llama layout (the families of rlvr.sampling.families) in bf16 (float32 numerics where they matter), finished rows leave the batch. A prompt
that continues a row of the last call (an episode's next turn) prefills only its new tokens
(rlvr.sampling.prefix_cache). A family with gated delta-net layers (Qwen3.5) runs on its own forward and states
(rlvr.sampling.qwen3_5) in HybridSampler, through the same decode loop (`decode`), without a prefix cache.

Falls back to the "hf" backend, with one warning that says why, for models the forward does not cover (the config's
default backend is "fast", so a model of another family, or a setting its forward does not run, samples with "hf").
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from . import llama, qwen3_5
from .cascade import CascadeCache
from .distribution import sample_tokens
from .families import Unsupported, check_supported, family_of
from .hf import HFSampler
from .prefix_cache import PrefixCache, row_entries
from .rollouts import LocalSampler, Rollouts, pack_rollouts

MAX_ROWS = 64  # decode-batch rows per chunk of prompts: bounds cache memory for large evaluations


def make_fast_sampler(model, tokenizer, *, stop_ids: list[int], dtype: str = "bfloat16", threads: int | None = None):
    """A FastSampler where the hand-written forward runs the model, else an HFSampler and one warning saying why
    (rollout.backend "fast", the default, is then "hf" for this model). Both checks count: the config's family and
    settings (check_supported), and the weights as loaded (a Llama with biases on o_proj or the MLP)."""
    try:
        config = llama.plain_config(model)
        check_supported(config)
        kind = HybridSampler if family_of(config).recurrent else FastSampler
        return kind(model, tokenizer, stop_ids=stop_ids, dtype=dtype, threads=threads)
    except Unsupported as why:
        warnings.warn(f"rollout.backend=fast does not run this model: {why}; sampling with hf", stacklevel=3)
        return HFSampler(model, tokenizer, stop_ids=stop_ids, dtype=dtype, threads=threads)


class FastSampler(LocalSampler):
    """The Llama-layout families. A subclass for another forward overrides `load` and `generate_chunk`, and sets
    `reuses_prefixes = False` where its caches cannot carry a row into the next call (it has no `prefix` then, and
    rlvr.environments.episode.continuing leaves it alone)."""

    reuses_prefixes = True

    def __init__(self, model, tokenizer, *, stop_ids: list[int], dtype: str = "bfloat16", threads: int | None = None):
        super().__init__(tokenizer, stop_ids=stop_ids, dtype=dtype, threads=threads)
        self.prefix = PrefixCache() if self.reuses_prefixes else None
        self.sync(model)

    def sync(self, model) -> None:
        self.w: Any = None  # memory: the old weights go before the new ones are built
        if self.prefix is not None:
            self.prefix.clear()  # keys and values of the old weights
        self.w = self.load(model)

    def load(self, model) -> Any:
        """The weights the forward reads, from the (LoRA-merged) policy."""
        return llama.load_weights(model, self.dtype)

    def generate_chunk(self, *args) -> tuple[list[list[int]], list[torch.Tensor], list[str], dict]:
        """G samples for each of a few prompts: _generate_chunk's arguments (the weights first) and result."""
        return _generate_chunk(*args)

    def _generate(self, prompt_ids, n, max_new_tokens, temperature, top_p, top_k, generator) -> Rollouts:
        t0 = time.perf_counter()
        per = max(1, MAX_ROWS // n)
        rows, logps, finish, timings = [], [], [], {"prefill": 0.0, "decode": 0.0}
        prefix = self.prefix if self.prefix is not None and self.prefix.enabled else None
        entries: dict | None = {} if prefix is not None else None
        if self.w is None:
            raise RuntimeError("the fast sampler has no weights: its sync(model) failed")
        for c in range(0, len(prompt_ids), per):
            chunk = self.generate_chunk(
                self.w,
                prompt_ids[c : c + per],
                n,
                max_new_tokens,
                self.stop_ids,
                dict(temperature=temperature, top_k=top_k, top_p=top_p, generator=generator),
                prefix,
                entries,
            )
            rows += chunk[0]
            logps += chunk[1]
            finish += chunk[2]
            for k in timings:
                timings[k] += chunk[3][k]
        if prefix is not None and entries is not None:
            prefix.replace(entries)
        ro = pack_rollouts(prompt_ids, n, rows, logps, finish, self.pad_id, self.tokenizer)
        ro.num_prompt_tokens = sum(len(p) for p in prompt_ids)
        ro.timings = timings
        ro.seconds = time.perf_counter() - t0
        return ro


def _generate_chunk(
    w: llama.LlamaWeights,
    prompts: list[list[int]],
    G: int,
    max_new: int,
    stop_ids: list[int],
    sampling: dict,
    prefix: PrefixCache | None = None,
    entries: dict | None = None,
) -> tuple[list[list[int]], list[torch.Tensor], list[str], dict]:
    """Generate G samples for each of a few prompts. Returns per-row (tokens, logp, finish) and timings. With
    `prefix`, a prompt that continues a cached row prefills only its new tokens, and `entries` gets this chunk's
    rows for the next call."""
    t0 = time.perf_counter()
    P = len(prompts)
    windows = [L.window for L in w.layers]  # None on a layer without one
    cache = CascadeCache(len(w.layers), P, G, w.n_kv, w.head_dim, [len(p) for p in prompts], w.dtype, w.fused, windows)
    # prefill: every prompt once, whatever G is, all prompts through the weights in one pass; of a prompt that
    # continues a row of the last call, only the tokens after that row's cached ones
    past = [prefix.longest(p) if prefix is not None else (0, None, None) for p in prompts]
    new = [len(p) - n0 for p, (n0, _, _) in zip(prompts, past)]
    attend = llama.prefill_attend_into(cache.pk, cache.pv, new, past, windows)
    positions = torch.cat([torch.arange(n0, len(p)) for p, (n0, _, _) in zip(prompts, past)])
    tokens = torch.tensor([t for p, (n0, _, _) in zip(prompts, past) for t in p[n0:]])
    hidden = llama.forward(w, tokens, positions, attend)
    last = torch.tensor(new).cumsum(0) - 1
    tok, lp = sample_tokens(llama.logits(w, hidden[last], upcast=False).repeat_interleave(G, dim=0), **sampling)
    t1 = time.perf_counter()
    prompt_len = torch.tensor([len(p) for p in prompts]).repeat_interleave(G)
    # row -> the keys and values of its generated tokens but the last, saved as it leaves
    generated: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def step(tok: torch.Tensor, t: int) -> torch.Tensor:
        return llama.logits(w, llama.forward(w, tok, prompt_len[cache.rows] + t, cache.attend), upcast=False)

    save = (lambda leaving, t: _save_generated(cache, leaving, t, generated)) if entries is not None else None
    rows_out, logps_out, finish = decode(cache, tok, lp, step, max_new, stop_ids, sampling, save)
    if entries is not None:
        entries.update(row_entries(prompts, G, rows_out, cache.pk, cache.pv, generated))
    return rows_out, logps_out, finish, {"prefill": t1 - t0, "decode": time.perf_counter() - t1}


class HybridSampler(FastSampler):
    """The fast sampler on a family with gated delta-net layers (Qwen3.5): rlvr.sampling.qwen3_5's weights, forward
    and states. No prefix cache: a row's recurrent state after its last sampled token is not the state its next turn
    starts from (that token has not been run), and the states of a whole batch would be kept between calls."""

    reuses_prefixes = False

    def load(self, model) -> qwen3_5.HybridWeights:
        return qwen3_5.load_weights(model, self.dtype)

    def generate_chunk(self, *args) -> tuple[list[list[int]], list[torch.Tensor], list[str], dict]:
        return _generate_hybrid_chunk(*args)


def _generate_hybrid_chunk(
    w: qwen3_5.HybridWeights, prompts: list[list[int]], G: int, max_new: int, stop_ids: list[int], sampling: dict, *_
) -> tuple[list[list[int]], list[torch.Tensor], list[str], dict]:
    """_generate_chunk's contract on qwen3_5's forward (its prefix arguments are None)."""
    t0 = time.perf_counter()
    cache, first = qwen3_5.prefill(w, prompts, G)
    tok, lp = sample_tokens(first, **sampling)
    t1 = time.perf_counter()
    prompt_len = torch.tensor([len(p) for p in prompts]).repeat_interleave(G)

    def step(tok: torch.Tensor, t: int) -> torch.Tensor:
        return qwen3_5.step(w, cache, tok, prompt_len[cache.rows] + t)

    rows, logps, finish = decode(cache, tok, lp, step, max_new, stop_ids, sampling)
    return rows, logps, finish, {"prefill": t1 - t0, "decode": time.perf_counter() - t1}


def decode(
    cache,
    tok: torch.Tensor,
    lp: torch.Tensor,
    step: Callable[[torch.Tensor, int], torch.Tensor],
    max_new: int,
    stop_ids: list[int],
    sampling: dict,
    on_leave: Callable[[torch.Tensor, int], None] | None = None,
) -> tuple[list[list[int]], list[torch.Tensor], list[str]]:
    """The decode loop of every fast forward, from the B rows' first tokens `tok` and their log-probs `lp` (B,) until
    each row stops or has max_new tokens. `cache` holds the rows' state: `rows` (the active rows, ascending),
    `keep(still)` (drop the rows whose entry in boolean `still` is False), `begin_step(t)`; step(tok, t) runs
    the active rows' tokens through the model at generation step t and returns their logits in the compute dtype.
    on_leave(leaving, t) sees, before they go, the active rows in boolean `leaving` (every row at the last step).
    Returns per row (tokens, log-probs, finish)."""
    B = tok.shape[0]
    out = torch.zeros(B, max(max_new, 1), dtype=torch.long)
    out_lp = torch.zeros(B, max(max_new, 1), dtype=torch.float32)
    lengths = torch.full((B,), max_new, dtype=torch.long)
    stopped = torch.zeros(B, dtype=torch.bool)
    stops = torch.tensor(stop_ids)
    for t in range(max_new):
        rows = cache.rows
        out[rows, t], out_lp[rows, t] = tok, lp
        done = torch.isin(tok, stops)
        lengths[rows[done]] = t + 1
        stopped[rows[done]] = True
        last_step = t + 1 == max_new or bool(done.all())
        if on_leave is not None:
            on_leave(done if not last_step else torch.ones_like(done), t)
        if last_step:
            break
        if bool(done.any()):
            cache.keep(~done)
            tok = tok[~done]
        cache.begin_step(t)
        tok, lp = sample_tokens(step(tok, t), **sampling)
    rows_out = [out[b, : lengths[b]].tolist() for b in range(B)]
    logps_out = [out_lp[b, : lengths[b]] for b in range(B)]
    return rows_out, logps_out, ["stop" if bool(s) else "length" for s in stopped]


def _save_generated(cache: CascadeCache, leaving: torch.Tensor, t: int, generated: dict) -> None:
    """Copy out the generated keys and values (tokens 0 .. t-1) of the active rows in boolean `leaving`."""
    for row, slot in zip(cache.rows[leaving].tolist(), cache.slots[leaving].tolist()):
        generated[row] = (cache.gk[:, slot, :, :t].clone(), cache.gv[:, slot, :, :t].clone())
