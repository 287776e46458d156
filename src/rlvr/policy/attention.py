"""Attention for the policy update on CPU: grouped-query matmuls with a float32 softmax and a hand backward.

Why: on this CPU the update's attention ran in torch's flash-attention kernel, whose backward took ~47 ms a
call for 16 rows x 9 heads x 128 x 226 (about 18 GFLOP/s, where a bf16 batched matmul of the same size runs
at ~300); the math backend was no faster, and with a padding mask both paths first copy each key/value head
once per query head it serves. Here the R = Hq / Hkv query heads that share a key/value head are stacked
into one matmul of R * Lq rows, so no key or value is copied, and the backward is the four matmuls of the
textbook gradient: 43 ms where flash took 91 (one layer, forward + backward, 1 thread). The probabilities
are kept for the backward in the compute dtype (about 8 MB a layer at the size above), where flash keeps only
the log-sum-exps. Precision: under bf16 the scores come out of the bf16 matmul rounded to bf16 (as in
transformers' eager attention; flash keeps them in float32); softmax and its backward run in float32. On a
real 16-row batch the update's log-probs differ from the sampler's by 0.032 on average (|difference|, mean
difference +0.0001), against 0.031 with flash.

Registered with transformers as ATTENTION ("rlvr_cpu"), with sdpa's boolean masks: `configure(model,
train.attention)` switches a loaded model to it (by default on the CPU; the trainer and SFT call it).
Shapes: B rows, Hq / Hkv heads, R = Hq / Hkv, Lq queries, Lk keys, D head dim.
"""

from __future__ import annotations

import torch

from rlvr.policy.load import base_model, model_device

ATTENTION = "rlvr_cpu"


def grouped_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, blocked: torch.Tensor, scale: float
) -> torch.Tensor:
    """softmax(q k^T * scale, blocked keys left out) v, with the R query heads of a key/value head stacked.

    q (B, Hkv, R * Lq, D), k/v (B, Hkv, Lk, D), blocked bool (B or 1, 1, 1, Lq, Lk) (True = do not attend),
    scale the softmax scale. Returns (B, Hkv, R * Lq, D) in q's dtype. A query with every key blocked (a
    left-padding position) gets a uniform softmax rather than NaN: a finite minimum, not -inf; nothing
    scores those positions.
    """
    return _GroupedAttention.apply(q, k, v, blocked, scale)


class _GroupedAttention(torch.autograd.Function):
    """Runs a few rows at a time so each chunk's float32 scores (~1 MiB) stay in the core's cache: the
    elementwise passes of the softmax and its backward are bound by memory traffic, not arithmetic."""

    @staticmethod
    def forward(ctx, q, k, v, blocked, scale):
        p = q.new_empty(q.shape[:-1] + (k.shape[2],))
        out = torch.empty_like(q)
        Lq = blocked.shape[-2]
        for s in _chunks(q.shape[0], p[0].numel()):
            scores = torch.matmul(q[s], k[s].transpose(-1, -2)).float().mul_(scale)
            scores.view(scores.shape[0], scores.shape[1], -1, Lq, scores.shape[-1]).masked_fill_(
                blocked[s] if blocked.shape[0] > 1 else blocked, torch.finfo(torch.float32).min
            )
            p[s] = torch.softmax(scores, dim=-1)
            torch.matmul(p[s], v[s], out=out[s])
        ctx.save_for_backward(q, k, v, p, out)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, d_out):
        q, k, v, p, out = ctx.saved_tensors
        d_out = d_out.to(q.dtype)
        d_q, d_k, d_v = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        for s in _chunks(q.shape[0], p[0].numel()):
            torch.matmul(p[s].transpose(-1, -2), d_out[s], out=d_v[s])
            d_p = torch.matmul(d_out[s], v[s].transpose(-1, -2)).float()
            # softmax backward: dS = P * (dP - rowsum(dP * P)), and rowsum(dP * P) = rowsum(dO * O)
            delta = (d_out[s].float() * out[s].float()).sum(-1, keepdim=True)
            d_s = d_p.sub_(delta).mul_(p[s]).mul_(ctx.scale).to(q.dtype)
            torch.matmul(d_s, k[s], out=d_q[s])
            torch.matmul(d_s.transpose(-1, -2), q[s], out=d_k[s])
        return d_q, d_k, d_v, None, None


def _chunks(rows: int, per_row: int, budget: int = 1 << 18) -> list[slice]:
    """Slices of rows holding about `budget` score elements each (1 MiB of float32)."""
    step = max(1, budget // max(per_row, 1))
    return [slice(i, min(i + step, rows)) for i in range(0, rows, step)]


def _blocked(mask: torch.Tensor | None, Lq: int, Lk: int) -> torch.Tensor:
    """(B or 1, 1, 1, Lq, Lk) bool, True where a query must not see a key, from sdpa's boolean mask
    (True = attend), or causal aligned to the last key when there is none."""
    if mask is None:
        return torch.ones(Lq, Lk, dtype=torch.bool).triu(Lk - Lq + 1)[None, None, None]
    if mask.dtype != torch.bool:  # an additive float mask: -inf (or a large negative) where blocked
        mask = mask > torch.finfo(mask.dtype).min / 2
    return ~mask[:, :, None]


def attention_forward(
    module, query, key, value, attention_mask, dropout: float = 0.0, scaling: float | None = None, **kwargs
):
    """transformers' attention-function contract: query (B, Hq, Lq, D), key/value (B, Hkv, Lk, D), mask as
    sdpa builds it. Returns (output (B, Lq, Hq, D), None)."""
    if dropout:
        raise ValueError(f"{ATTENTION} attention has no dropout (got {dropout}); use attn_implementation='sdpa'")
    B, Hq, Lq, D = query.shape
    Hkv, Lk = key.shape[1], key.shape[2]
    R = Hq // Hkv
    scale = scaling if scaling is not None else D**-0.5
    blocked = _blocked(attention_mask[:, :, :, :Lk] if attention_mask is not None else None, Lq, Lk)
    # Under autocast, as sdpa would: RoPE leaves q and k in float32 (its tables follow the float32 residual
    # stream), v comes out of a bf16 matmul.
    dt = torch.get_autocast_dtype(query.device.type) if torch.is_autocast_enabled(query.device.type) else query.dtype
    query, key, value = query.to(dt), key.to(dt), value.to(dt)
    out = grouped_attention(query.reshape(B, Hkv, R * Lq, D), key, value, blocked, scale)
    return out.view(B, Hq, Lq, D).transpose(1, 2).contiguous(), None


def register() -> None:
    """Make ATTENTION a valid `attn_implementation` for transformers (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ATTENTION, attention_forward)
    AttentionMaskInterface.register(ATTENTION, sdpa_mask)


def configure(model, choice: str) -> str:
    """Apply `train.attention` to a loaded transformers (or peft-wrapped) model: "rlvr" (this module),
    "model" (the attention the model was loaded with), or "auto" (this module for a model on the CPU, the
    model's own elsewhere, e.g. flash kernels on a GPU). Returns the implementation in use."""
    base = base_model(model)
    if choice == "rlvr" or (choice == "auto" and model_device(model).type == "cpu"):
        register()
        base.set_attn_implementation(ATTENTION)
    return base.config._attn_implementation
