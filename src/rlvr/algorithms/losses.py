"""Clipped policy-gradient surrogates (token or sequence ratio), the k3 KL estimator, aggregation.

Shapes: B rows (completions), T completion positions. `mask` (B, T) is 1.0 on sampled tokens that
count and 0.0 on padding (and on whole rows that a filter dropped). Every function takes plain numbers
and tensors and returns tensors: nothing here calls `.item()`, so nothing forces a device sync.
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

RATIOS = ("token", "sequence")
AGGS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")

# exp() of a log-ratio beyond this overflows float32 long before it means anything; the clamp only
# touches tokens whose probability moved by a factor of e^20, which clipping ignores anyway.
_MAX_LOG_RATIO = 20.0


def batch_counts(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Denominators for `aggregate` over a whole batch: mask (B, T) -> (num_tokens, num_seqs), 0-d.

    num_seqs counts rows with at least one unmasked token: a row that a filter masked out entirely
    (e.g. a truncated completion under DAPO's overlong filter) neither adds loss nor dilutes it.
    Compute these once on the full batch and pass them to every micro-batch's `policy_loss`.
    """
    return mask.sum(), (mask.sum(-1) > 0).sum().to(mask.dtype)


def _count(n, like: torch.Tensor) -> torch.Tensor:
    """A denominator as a tensor on like's device, at least 1 so an empty batch gives 0, not NaN."""
    return torch.as_tensor(n, dtype=like.dtype, device=like.device).clamp(min=1)


def aggregate(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    *,
    norm_len: float | None = None,
    num_tokens=None,
    num_seqs=None,
) -> torch.Tensor:
    """Reduce a per-token loss (B, T) to a scalar, the way each paper does.

    "token-mean" (DAPO):  sum_{i,t} m_it l_it / N_tok            every token weighs the same
    "seq-mean-token-mean" (GRPO, GSPO): (1/N_seq) sum_i [sum_t m_it l_it / |o_i|]
                                                                 every sequence weighs the same
    "seq-mean-token-sum-norm" (Dr. GRPO): sum_{i,t} m_it l_it / (N_seq * norm_len)
                                                                 a constant: no length bias
    N_tok, N_seq default to this batch's counts (see `batch_counts`); pass the full batch's counts to
    make micro-batch losses sum to the full-batch loss exactly. norm_len defaults to T (mask.shape[-1]);
    pass the generation budget (max new tokens) so it does not depend on a micro-batch's padding.
    """
    if mode not in AGGS:
        raise ValueError(f"unknown aggregation {mode!r}; choose from {', '.join(AGGS)}")
    mask = mask.to(per_token.dtype)
    local_tokens, local_seqs = batch_counts(mask)
    n_tok = local_tokens if num_tokens is None else num_tokens
    n_seq = local_seqs if num_seqs is None else num_seqs
    masked = per_token * mask
    if mode == "token-mean":
        return masked.sum() / _count(n_tok, masked)
    if mode == "seq-mean-token-mean":
        # |o_i| clamped to 1 so an all-masked row contributes 0 instead of 0/0
        seq_means = masked.sum(-1) / mask.sum(-1).clamp(min=1)
        return seq_means.sum() / _count(n_seq, masked)
    length = float(mask.shape[-1] if norm_len is None else norm_len)
    return masked.sum() / (_count(n_seq, masked) * length)


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || pi_ref), per token: (B, T), (B, T) -> (B, T).

    With x = ref_logp - logp:  k3 = exp(x) - x - 1  (>= 0, unbiased, low variance).
    Gradient w.r.t. logp: 1 - exp(x), i.e. it pulls logp toward ref_logp.
    """
    x = (ref_logp - logp).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    return torch.exp(x) - x - 1.0


def log_ratio(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor, level: str) -> torch.Tensor:
    """Log importance ratio per token (B, T), at token or sequence level.

    "token":    log r_it = logp_it - old_logp_it
    "sequence" (GSPO): log s_i = (1/|o_i|) sum_t m_it (logp_it - old_logp_it), and each token uses
                log s_it = sg[log s_i] + logp_it - sg[logp_it], whose value is log s_i and whose
                gradient is that of logp_it, so d s_it = s_i * d logp_it for every token.
    """
    if level not in RATIOS:
        raise ValueError(f"unknown ratio level {level!r}; choose from {', '.join(RATIOS)}")
    delta = logp - old_logp
    if level == "token":
        return delta.clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    mask = mask.to(delta.dtype)
    seq = (delta * mask).sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1)
    seq = seq.clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    return seq.detach() + logp - logp.detach()


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1)


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor | None,
    adv: torch.Tensor,
    mask: torch.Tensor,
    *,
    ratio: str = "token",
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    agg: str = "token-mean",
    ref_logp: torch.Tensor | None = None,
    beta: float = 0.0,
    norm_len: float | None = None,
    num_tokens=None,
    num_seqs=None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The clipped surrogate loss of GRPO / DAPO / GSPO / Dr. GRPO, as one scalar to minimise.

    logp, old_logp, ref_logp, mask: (B, T); adv: (B,). old_logp=None means "one update per rollout
    batch": the old policy is the current one, so the ratio is exp(logp - sg[logp]) = 1 with the
    right gradient, and no second forward pass is needed.
    Returns (loss 0-d, stats) with stats "clip/low_frac", "clip/high_frac", "ratio/mean" and, when
    beta > 0, "kl": 0-d tensors over the unmasked tokens of this batch, detached.
    """
    if beta > 0 and ref_logp is None:
        raise ValueError("beta > 0 needs ref_logp (the reference policy's log-probs)")
    old = logp.detach() if old_logp is None else old_logp
    mask = mask.to(logp.dtype)
    r = torch.exp(log_ratio(logp, old, mask, ratio))
    a = adv.to(logp.dtype).unsqueeze(-1)
    # PPO surrogate: l = -min(r A, clip(r, 1 - eps_low, 1 + eps_high) A) = max(-r A, -clip(r) A)
    unclipped = -r * a
    clipped = -r.clamp(1.0 - clip_low, 1.0 + clip_high) * a
    # where the clipped branch is strictly larger it is constant in theta: those tokens get no gradient
    per_token = torch.where(clipped > unclipped, clipped, unclipped)
    stats = {
        "clip/low_frac": _masked_mean(((r < 1.0 - clip_low) & (a < 0)).to(mask.dtype), mask).detach(),
        "clip/high_frac": _masked_mean(((r > 1.0 + clip_high) & (a > 0)).to(mask.dtype), mask).detach(),
        "ratio/mean": _masked_mean(r, mask).detach(),
    }
    if beta > 0:
        kl = kl_k3(logp, ref_logp)
        # J = surrogate + beta * KL(pi || pi_ref), KL estimated per token by k3
        per_token = per_token + beta * kl
        stats["kl"] = _masked_mean(kl, mask).detach()
    loss = aggregate(per_token, mask, agg, norm_len=norm_len, num_tokens=num_tokens, num_seqs=num_seqs)
    return loss, stats


def _chunk_rows(vocab: int, chunk_rows: int | None) -> int:
    # about 2**24 float32 values (64 MiB) per chunk unless told otherwise
    return chunk_rows if chunk_rows else max(1, 2**24 // max(1, vocab))


def _rowwise(fn, logits: torch.Tensor, ids: torch.Tensor | None, chunk_rows: int | None) -> torch.Tensor:
    """Apply fn(logits chunk (n, V) [, ids chunk (n,)]) -> (n,) over row chunks of (..., V) logits.

    Under autograd each chunk is checkpointed: its float32 intermediates are rebuilt during backward
    instead of being kept, so at most one chunk's float32 copy exists at a time.
    """
    flat = logits.reshape(-1, logits.shape[-1])
    step = _chunk_rows(flat.shape[-1], chunk_rows)
    grad = torch.is_grad_enabled() and flat.requires_grad
    # split, not slicing in a loop: its backward writes every chunk's gradient into one (N, V) tensor
    # at once, where each slice's backward would allocate a full-size zero tensor of its own
    chunks = flat.split(step)
    id_chunks = [()] * len(chunks) if ids is None else [(c,) for c in ids.reshape(-1).split(step)]
    outs = []
    for chunk, extra in zip(chunks, id_chunks):
        if grad:
            outs.append(checkpoint(fn, chunk, *extra, use_reentrant=False, preserve_rng_state=False))
        else:
            outs.append(fn(chunk, *extra))
    out = torch.cat(outs) if outs else flat.new_zeros(0, dtype=torch.float32)
    return out.reshape(logits.shape[:-1])


def _entropy(chunk: torch.Tensor) -> torch.Tensor:
    z = chunk.float()
    logp = torch.log_softmax(z, dim=-1)
    # H = -sum_v p_v log p_v
    return -(logp.exp() * logp).sum(-1)


class _ChosenLogp(torch.autograd.Function):
    """log softmax(z)_y over row chunks, float32 inside whatever the logits' dtype, with a hand-written
    backward: d/dz = g * (onehot(y) - softmax(z)), rebuilt chunk by chunk from the saved logits and the
    saved log-sum-exps. Nothing of size (N, V) in float32 is kept between forward and backward, and each
    chunk stays small enough to be reused from the allocator (large tensors are fresh pages every time).
    """

    @staticmethod
    def forward(ctx, flat: torch.Tensor, ids: torch.Tensor, rows: torch.Tensor, step: int) -> torch.Tensor:
        lse = torch.empty(rows.numel(), dtype=torch.float32)
        out = torch.empty(rows.numel(), dtype=torch.float32)
        for s in range(0, rows.numel(), step):
            z = flat[rows[s:s + step]].float()
            lse[s:s + step] = torch.logsumexp(z, dim=-1)
            out[s:s + step] = z.gather(-1, ids[s:s + step, None])[:, 0] - lse[s:s + step]
        ctx.save_for_backward(flat, ids, rows, lse)
        ctx.step = step
        return out

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        flat, ids, rows, lse = ctx.saved_tensors
        grad = torch.zeros_like(flat)
        for s in range(0, rows.numel(), ctx.step):
            g = grad_out[s:s + ctx.step, None].float()
            z = flat[rows[s:s + ctx.step]].float()
            z.sub_(lse[s:s + ctx.step, None]).exp_().mul_(-g)  # -g * softmax(z)
            z.scatter_add_(-1, ids[s:s + ctx.step, None], g)  # + g at the chosen token
            grad[rows[s:s + ctx.step]] = z.to(flat.dtype)
        return grad, None, None, None


def selective_log_softmax(logits: torch.Tensor, ids: torch.Tensor, chunk_rows: int | None = None,
                          mask: torch.Tensor | None = None) -> torch.Tensor:
    """Log-probability of the chosen ids: logits (..., V) any float dtype, ids (...) long -> (...) float32.

    Equal to log_softmax(logits.float(), -1).gather(-1, ids), without ever holding the float32
    log-softmax of the whole batch: rows are processed `chunk_rows` at a time (default: ~4 MiB of float32).
    With `mask` (...) only the positions where it is nonzero are computed (padding costs nothing); the others
    are 0 with zero gradient.
    """
    if logits.shape[:-1] != ids.shape:
        raise ValueError(f"logits {tuple(logits.shape)} must be ids {tuple(ids.shape)} plus a vocab axis")
    flat = logits.reshape(-1, logits.shape[-1])
    keep = mask.reshape(-1) != 0 if mask is not None else torch.ones(flat.shape[0], dtype=torch.bool)
    rows = keep.nonzero()[:, 0]
    step = chunk_rows or max(1, 2**20 // max(1, flat.shape[-1]))
    chosen = _ChosenLogp.apply(flat, ids.reshape(-1)[rows], rows, step)
    out = torch.zeros(flat.shape[0], dtype=torch.float32).index_put((rows,), chosen)
    return out.reshape(ids.shape)


def token_entropy_from_logits(logits: torch.Tensor, chunk_rows: int | None = None) -> torch.Tensor:
    """Entropy of the next-token distribution: logits (..., V) -> (...) float32, in nats, chunked."""
    return _rowwise(_entropy, logits, None, chunk_rows)


__all__ = ["RATIOS", "AGGS", "batch_counts", "aggregate", "kl_k3", "log_ratio", "policy_loss", "selective_log_softmax",
           "token_entropy_from_logits"]
