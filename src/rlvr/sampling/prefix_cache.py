"""The fast sampler's memory of its last call: for each row it sampled, the keys and values of the row's ids so far
(its prompt, then every sampled token but the last, whose keys and values no decode step computes), so that the
next call's prompts that continue those rows prefill only what is new. An episode's next turn is such a prompt:
the row's ids, the last sampled token, the environment's answer. Without it each later turn would prefill the
whole conversation again, once per row (the first turn prefills a problem's opening once for its G rows).

Keys and values are a function of the weights: `FastSampler.sync` clears the cache. Only the last call's rows are
kept, so the memory is one batch's cache: (layers, Hkv, L, D) keys and values a row. It is `enabled` only while
episodes run (rlvr.environments.episode.run_episodes): a single-turn step's next prompts never continue its rows,
and saving them would cost it time.
"""

from __future__ import annotations

import torch


class PrefixCache:
    def __init__(self):
        self.entries: dict[tuple[int, ...], tuple[torch.Tensor, torch.Tensor]] = {}
        self.reused = 0  # prompt tokens not prefilled again, since the start (the bench reports it)
        self.enabled = False

    def clear(self) -> None:
        self.entries = {}

    def longest(self, prompt: list[int]) -> tuple[int, torch.Tensor | None, torch.Tensor | None]:
        """(n, keys, values) of the longest cached row that `prompt` continues with at least one new token;
        (0, None, None) where none. keys/values: (layers, Hkv, n, D)."""
        best: tuple[int, torch.Tensor | None, torch.Tensor | None] = (0, None, None)
        for key, (k, v) in self.entries.items():
            n = len(key)
            if best[0] < n < len(prompt) and tuple(prompt[:n]) == key:
                best = (n, k, v)
        self.reused += best[0]
        return best

    def replace(self, entries: dict[tuple[int, ...], tuple[torch.Tensor, torch.Tensor]]) -> None:
        """This call's rows, in place of the last call's."""
        self.entries = entries


def row_entries(prompts: list[list[int]], G: int, rows: list[list[int]], pk, pv, generated: dict) -> dict:
    """tuple(ids) -> (keys, values) for each row b = p * G + g: prompt p's cache (pk/pv: (layers, P, Hkv, Lmax, D))
    followed by the keys and values of the row's generated tokens but its last (`generated[b]`: (layers, Hkv, t,
    D), saved as the row left the decode batch)."""
    out = {}
    for b, ids in enumerate(rows):
        p = b // G
        L, (gk, gv) = len(prompts[p]), generated[b]
        n = max(len(ids) - 1, 0)
        keys = torch.cat([pk[:, p, :, :L], gk[:, :, :n]], dim=2)
        values = torch.cat([pv[:, p, :, :L], gv[:, :, :n]], dim=2)
        out[tuple(prompts[p]) + tuple(ids[:n])] = (keys, values)
    return out


__all__ = ["PrefixCache", "row_entries"]
