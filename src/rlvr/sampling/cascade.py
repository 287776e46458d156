"""Decode-time attention with a shared prompt ("cascade" attention) and a compacting KV cache.

Each prompt's keys/values are stored once, (P, Hkv, Lmax, D), and every sample of that prompt attends
to them in one call whose query rows are the G * rep queries of the group (GQA folded into the query
length), so a step reads a prompt's cache once instead of G times. The tokens each sample generated
live in a per-sample cache, (S, Hkv, Tcap, D), aligned at generation step 0 (all samples advance in
lockstep). The two partial attentions are merged exactly through their log-sum-exps.

Both parts run in torch's CPU flash-attention kernel, which also returns the log-sum-exp; a plain
matmul/softmax path stands in where that private op is missing. A layer with a sliding window of W (`windows`, Gemma 3's
sliding layers) sees the last W keys: from step W - 1 on, none of the prompt's. (Batched bf16 matmuls over hundreds
of 3 x 64 query blocks were 2x slower.) Finished samples leave the decode batch at once (the weight
matmuls see only the n active rows); the caches keep their slots until the active set falls to 3/4
of the slots, then are compacted. The generated cache grows in blocks of BLOCK positions.

Given rlvr.sampling.native's decode ops (`kernel`: the sampler passes its weights' `fused`, set in bf16 and float32
where they build), one call a layer does all of a step's attention (cache write, prompt and generated keys under one
float32 softmax): the same result as the two flash calls and their merge up to float32 rounding, for a fraction of
their fixed costs.
"""

from __future__ import annotations

import torch

BLOCK = 64
_FLASH = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def attention_lse(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None):
    """Softmax attention with the softmax scale already in q, and its log-sum-exp.

    q (B, H, Lq, D), k/v (B, H, Lk, D), mask additive float32 broadcastable to (B, H, Lq, Lk).
    Returns out (B, H, Lq, D) in q's dtype and lse (B, H, Lq) float32.
    """
    if _FLASH is not None:
        try:
            return _FLASH(q, k, v, attn_mask=mask, scale=1.0)
        except RuntimeError:
            pass
    scores = (q @ k.transpose(-1, -2)).float()
    if mask is not None:
        scores = scores + mask
    lse = scores.logsumexp(dim=-1)
    return ((scores - lse[..., None]).exp().to(q.dtype) @ v), lse


class CascadeCache:
    def __init__(
        self,
        n_layers: int,
        n_prompts: int,
        group: int,
        n_kv: int,
        head_dim: int,
        prompt_lens: list[int],
        dtype: torch.dtype,
        kernel=None,
        windows: list[int | None] | None = None,
    ):
        Lmax = max(prompt_lens)
        self.windows = windows  # per layer, its sliding window or None (llama.Layer.window); None: no layer has one
        self.kernel = kernel  # rlvr.sampling.native's decode ops (bf16 or float32 caches), or None for the torch path
        self.prompt_lens = torch.tensor(prompt_lens, dtype=torch.long)
        self.P, self.G, self.dtype = n_prompts, group, dtype
        self.pk = torch.zeros(n_layers, n_prompts, n_kv, Lmax, head_dim, dtype=dtype)
        self.pv = torch.zeros_like(self.pk)
        pos, lens = torch.arange(Lmax), torch.tensor(prompt_lens)
        # additive mask over each prompt's padding, (P, 1, 1, Lmax) float32
        self.prompt_mask = torch.where(pos[None, :] < lens[:, None], 0.0, float("-inf"))[:, None, None, :]
        B = n_prompts * group
        self.gk = torch.zeros(n_layers, B, n_kv, BLOCK, head_dim, dtype=dtype)
        self.gv = torch.zeros_like(self.gk)
        self.n_slots = B
        self.rows = torch.arange(B)  # active rows (p * G + g), ascending
        self.slots = torch.arange(B)  # their slots in the generated cache
        self.step = 0
        self.full = True
        self.prompt_of = self.rows // group  # the active rows' prompts (the kernel's index into the prompt cache)

    @property
    def n_active(self) -> int:
        return self.rows.numel()

    def keep(self, still: torch.Tensor) -> None:
        """Drop active rows whose entry in the boolean (n,) `still` is False; compact when worthwhile."""
        self.rows, self.slots = self.rows[still], self.slots[still]
        self.prompt_of = self.rows // self.G
        if 0 < self.n_active <= 0.75 * self.n_slots:
            self.gk, self.gv = self.gk[:, self.slots], self.gv[:, self.slots]  # indexing copies: compact
            self.n_slots, self.slots = self.n_active, torch.arange(self.n_active)

    def begin_step(self, t: int) -> None:
        """Prepare generation step t (0-based): grow the generated cache by a block when full."""
        self.step = t
        if t >= self.gk.shape[3]:
            pad = torch.zeros(self.gk.shape[:3] + (BLOCK, self.gk.shape[4]), dtype=self.dtype)
            self.gk, self.gv = torch.cat([self.gk, pad], dim=3), torch.cat([self.gv, pad], dim=3)
        self.full = self.n_active == self.n_slots

    def attend(self, i: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q (n, Hkv, rep, D) pre-scaled, k/v (n, Hkv, D) for the active rows at step `self.step`."""
        n, Hkv, rep, D = q.shape
        t, gk, gv = self.step, self.gk[i], self.gv[i]
        window = self.windows[i] if self.windows else None
        if self.kernel is not None:
            return self.kernel.decode_attend(
                q, k, v, self.pk[i], self.pv[i], gk, gv, self.prompt_of, self.slots, self.prompt_lens, t, window or 0
            )
        lo = 0 if window is None else max(0, t + 1 - window)  # the first generated key in the window
        if self.full:
            gk[:, :, t], gv[:, :, t] = k, v
            o_gen, lse_gen = attention_lse(q, gk[:, :, lo : t + 1], gv[:, :, lo : t + 1])
        else:
            gk[self.slots, :, t], gv[self.slots, :, t] = k, v
            qs = _scatter(q, self.slots, self.n_slots)
            o_gen, lse_gen = attention_lse(qs, gk[:, :, lo : t + 1], gv[:, :, lo : t + 1])
            o_gen, lse_gen = o_gen[self.slots], lse_gen[self.slots]
        if window is not None and t + 1 >= window:  # the prompt has left the window
            return o_gen.reshape(n, Hkv * rep * D)
        mask = self.prompt_mask if window is None else self._window_mask(t, window)
        o_pr, lse_pr = attention_lse(self._from_rows(q), self.pk[i], self.pv[i], mask)
        o_pr, lse_pr = self._to_rows(o_pr), self._to_rows(lse_pr[..., None])
        # softmax over prompt + generated keys = the two partial softmaxes weighted by their total mass
        w_pr = torch.sigmoid(lse_pr - lse_gen[..., None]).to(self.dtype)
        return torch.lerp(o_gen, o_pr, w_pr).view(n, Hkv * rep * D)

    def _window_mask(self, t: int, window: int) -> torch.Tensor:
        """prompt_mask, less the prompt keys a window of `window` no longer sees at step t: a query at position L + t
        sees keys from L + t + 1 - window on."""
        pos, first = torch.arange(self.pk.shape[3]), self.prompt_lens + t + 1 - window
        return self.prompt_mask.masked_fill((pos[None, :] < first[:, None])[:, None, None, :], float("-inf"))

    def _from_rows(self, x: torch.Tensor) -> torch.Tensor:
        """(n, Hkv, rep, X) for active rows -> (P, Hkv, G * rep, X), zeros for finished rows."""
        n, Hkv, rep, X = x.shape
        grid = x if n == self.P * self.G else _scatter(x, self.rows, self.P * self.G)
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
