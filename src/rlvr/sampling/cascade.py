"""Decode-time attention with a shared prompt ("cascade" attention) and a compacting KV cache.

Each prompt's keys/values are stored once, (P, Hkv, Lmax, D), and every sample of that prompt attends
to them through one batched matmul whose rows are the G * rep queries of the group, so a step reads a
prompt's cache once instead of G times. The tokens each sample generated live in a per-sample cache,
(S, Hkv, Tgen, D), aligned at generation step 0 (all samples advance in lockstep). Both score blocks
go through one float32 softmax, so the result is exact attention over prompt + generated tokens.

Finished samples leave the decode batch: the matmuls over weights see only the n active rows. The
caches keep their slots until the active set falls to 3/4 of the slots, then are compacted.
"""
from __future__ import annotations

import torch


class CascadeCache:
    def __init__(self, n_layers: int, n_prompts: int, group: int, n_kv: int, head_dim: int,
                 prompt_lens: list[int], max_new_tokens: int, dtype: torch.dtype, scale: float):
        Lmax = max(prompt_lens)
        self.P, self.G, self.scale, self.dtype = n_prompts, group, scale, dtype
        self.pk = torch.zeros(n_layers, n_prompts, n_kv, Lmax, head_dim, dtype=dtype)
        self.pv = torch.zeros_like(self.pk)
        # additive mask over prompt positions: 0 inside each prompt, -inf on its padding
        pos = torch.arange(Lmax)
        lens = torch.tensor(prompt_lens)
        self.prompt_bias = torch.where(pos[None, :] < lens[:, None], 0.0, float("-inf"))  # (P, Lmax)
        B = n_prompts * group
        self.gk = torch.zeros(n_layers, B, n_kv, max(max_new_tokens, 1), head_dim, dtype=dtype)
        self.gv = torch.zeros_like(self.gk)
        self.slot_rows = torch.arange(B)  # original row (p * G + g) held by each gen-cache slot
        self.rows = torch.arange(B)  # active rows, ascending
        self.slots = torch.arange(B)  # their slots
        self.step = 0  # generation index of the tokens being decoded now

    @property
    def n_active(self) -> int:
        return self.rows.numel()

    def keep(self, still: torch.Tensor) -> None:
        """Drop active rows whose entry in the boolean (n,) `still` is False; compact when worthwhile."""
        self.rows, self.slots = self.rows[still], self.slots[still]
        if 0 < self.n_active <= 0.75 * self.slot_rows.numel():
            self.gk, self.gv = self.gk[:, self.slots], self.gv[:, self.slots]  # indexing copies: compact
            self.slot_rows = self.rows.clone()
            self.slots = torch.arange(self.n_active)

    def attend(self, i: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q (n, Hkv, rep, D), k/v (n, Hkv, D) for the active rows at generation step `self.step`."""
        n, Hkv, rep, D = q.shape
        t = self.step
        full_slots = n == self.slot_rows.numel()
        if full_slots:
            self.gk[i, :, :, t], self.gv[i, :, :, t] = k, v
        else:
            self.gk[i, self.slots, :, t], self.gv[i, self.slots, :, t] = k, v
        q = q * self.scale
        # generated part: one matmul per slot over its own t + 1 keys
        qs = q if full_slots else _scatter(q, self.slots, self.slot_rows.numel())
        s_gen = (qs @ self.gk[i, :, :, : t + 1].transpose(-1, -2)).float()  # (S, Hkv, rep, t+1)
        if not full_slots:
            s_gen = s_gen[self.slots]
        # prompt part: per prompt, the G * rep queries of its samples against its keys at once
        s_pr = self._to_rows(self._from_rows(q) @ self.pk[i].transpose(-1, -2)).float()
        s_pr = s_pr + self.prompt_bias[self.rows // self.G][:, None, None, :]
        probs = torch.cat([s_pr, s_gen], dim=-1).softmax(dim=-1).to(self.dtype)
        p_pr, p_gen = probs.split([s_pr.shape[-1], t + 1], dim=-1)
        ps = p_gen if full_slots else _scatter(p_gen, self.slots, self.slot_rows.numel())
        o_gen = ps @ self.gv[i, :, :, : t + 1]
        if not full_slots:
            o_gen = o_gen[self.slots]
        o_pr = self._to_rows(self._from_rows(p_pr) @ self.pv[i])
        return (o_pr + o_gen).reshape(n, Hkv * rep * D)

    def _from_rows(self, x: torch.Tensor) -> torch.Tensor:
        """(n, Hkv, rep, X) for active rows -> (P, Hkv, G * rep, X), zeros for finished rows."""
        n, Hkv, rep, X = x.shape
        grid = _scatter(x, self.rows, self.P * self.G) if n < self.P * self.G else x
        return grid.view(self.P, self.G, Hkv, rep, X).transpose(1, 2).reshape(self.P, Hkv, self.G * rep, X)

    def _to_rows(self, y: torch.Tensor) -> torch.Tensor:
        """(P, Hkv, G * rep, X) -> (n, Hkv, rep, X) for the active rows."""
        P, Hkv, Grep, X = y.shape
        y = y.view(P, Hkv, self.G, Grep // self.G, X).transpose(1, 2).reshape(P * self.G, Hkv, Grep // self.G, X)
        return y if self.n_active == P * self.G else y[self.rows]


def _scatter(x: torch.Tensor, index: torch.Tensor, size: int) -> torch.Tensor:
    out = x.new_zeros((size,) + tuple(x.shape[1:]))
    out[index] = x
    return out
