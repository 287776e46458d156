"""Log-softmax kernels of the policy's forward: the chosen tokens' log-probs and the entropy, from logits (..., V),
without ever holding the float32 log-softmax of a whole batch (rows are processed in chunks)."""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint


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
        lse = flat.new_empty(rows.numel(), dtype=torch.float32)
        out = flat.new_empty(rows.numel(), dtype=torch.float32)
        for s in range(0, rows.numel(), step):
            z = flat[rows[s : s + step]].float()
            lse[s : s + step] = torch.logsumexp(z, dim=-1)
            out[s : s + step] = z.gather(-1, ids[s : s + step, None])[:, 0] - lse[s : s + step]
        ctx.save_for_backward(flat, ids, rows, lse)
        ctx.step = step
        return out

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        flat, ids, rows, lse = ctx.saved_tensors
        grad = torch.zeros_like(flat)
        for s in range(0, rows.numel(), ctx.step):
            g = grad_out[s : s + ctx.step, None].float()
            z = flat[rows[s : s + ctx.step]].float()
            z.sub_(lse[s : s + ctx.step, None]).exp_().mul_(-g)  # -g * softmax(z)
            z.scatter_add_(-1, ids[s : s + ctx.step, None], g)  # + g at the chosen token
            grad[rows[s : s + ctx.step]] = z.to(flat.dtype)
        return grad, None, None, None


def selective_log_softmax(
    logits: torch.Tensor, ids: torch.Tensor, chunk_rows: int | None = None, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Log-probability of the chosen ids: logits (..., V) any float dtype, ids (...) long -> (...) float32.

    Equal to log_softmax(logits.float(), -1).gather(-1, ids), without ever holding the float32
    log-softmax of the whole batch: rows are processed `chunk_rows` at a time (default: ~4 MiB of float32).
    With `mask` (...) only the positions where it is nonzero are computed (padding costs nothing); the others
    are 0 with zero gradient.
    """
    if logits.shape[:-1] != ids.shape:
        raise ValueError(f"logits {tuple(logits.shape)} must be ids {tuple(ids.shape)} plus a vocab axis")
    flat = logits.reshape(-1, logits.shape[-1])
    keep = mask.reshape(-1) != 0 if mask is not None else flat.new_ones(flat.shape[0], dtype=torch.bool)
    rows = keep.nonzero()[:, 0]
    step = chunk_rows or max(1, 2**20 // max(1, flat.shape[-1]))
    chosen = _ChosenLogp.apply(flat, ids.reshape(-1)[rows], rows, step)
    out = flat.new_zeros(flat.shape[0], dtype=torch.float32).index_put((rows,), chosen)
    return out.reshape(ids.shape)


def tempers(temperature: float) -> bool:
    """Whether scoring at this sampling temperature divides the logits by it: not at 1, and not at 0 (greedy: the
    tokens are scored under the model's own distribution)."""
    return temperature not in (0.0, 1.0)


class _HeadChosenLogp(torch.autograd.Function):
    """log softmax(h W^T * inv_temp)_y from hidden states h (N, H) and a frozen head W (V, H), a chunk of rows at a
    time, so that no (N, V) tensor exists, neither the logits nor their gradient. The backward needs no logits:
    d logp / dh = (W_y - softmax(z) W) * inv_temp, which does not depend on the incoming gradient, so the forward forms
    it chunk by chunk while the chunk's logits are at hand (an (N, H) float32 tensor, H / V of the logits' size) and
    the backward only scales its rows. The same FLOPs as the head's forward and backward on whole logits; W takes no
    gradient (a frozen base's head, as under LoRA)."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, weight: torch.Tensor, ids: torch.Tensor, inv_temp: float, step: int):
        out = h.new_empty(h.shape[0], dtype=torch.float32)
        dh = torch.empty(h.shape, dtype=torch.float32, device=h.device) if ctx.needs_input_grad[0] else None
        for s in range(0, h.shape[0], step):
            y = ids[s : s + step]
            z = torch.matmul(h[s : s + step], weight.T).float()  # under autocast as the head's own matmul would run
            if inv_temp != 1.0:
                z.mul_(inv_temp)
            lse = torch.logsumexp(z, dim=-1)
            out[s : s + step] = z.gather(-1, y[:, None])[:, 0] - lse
            if dh is not None:
                p = z.sub_(lse[:, None]).exp_().to(h.dtype)  # softmax(z), in the dtype the head's backward takes
                dh[s : s + step] = (weight[y].float() - torch.matmul(p, weight).float()).mul_(inv_temp)
        ctx.save_for_backward(dh)
        ctx.dtype = h.dtype
        return out

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        (dh,) = ctx.saved_tensors
        return (grad_out[:, None].float() * dh).to(ctx.dtype), None, None, None, None


def head_chosen_logp(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    ids: torch.Tensor,
    temperature: float = 1.0,
    mask: torch.Tensor | None = None,
    chunk_rows: int | None = None,
) -> torch.Tensor:
    """Log-probability of the chosen ids under logits hidden @ weight.T / temperature, without the logits of the whole
    batch: hidden (..., H), weight (V, H) frozen, ids (...) long -> (...) float32. Equal to
    selective_log_softmax(hidden @ weight.T / temperature, ids) (temperature 0 or 1: the logits as they are). With
    `mask` only the positions where it is nonzero are computed; the others are 0 with zero gradient."""
    if hidden.shape[:-1] != ids.shape:
        raise ValueError(f"hidden {tuple(hidden.shape)} must be ids {tuple(ids.shape)} plus a hidden axis")
    flat = hidden.reshape(-1, hidden.shape[-1])
    keep = mask.reshape(-1) != 0 if mask is not None else torch.ones(flat.shape[0], dtype=torch.bool)
    rows = keep.to(flat.device).nonzero()[:, 0]
    step = chunk_rows or max(1, 2**24 // max(1, weight.shape[0]))  # about 64 MiB of float32 logits a chunk
    inv_temp = 1.0 / temperature if tempers(temperature) else 1.0
    chosen = _HeadChosenLogp.apply(flat[rows], weight, ids.reshape(-1)[rows], inv_temp, step)
    out = flat.new_zeros(flat.shape[0], dtype=torch.float32).index_put((rows,), chosen)
    return out.reshape(ids.shape)


def token_entropy_from_logits(logits: torch.Tensor, chunk_rows: int | None = None) -> torch.Tensor:
    """Entropy of the next-token distribution: logits (..., V) -> (...) float32, in nats, chunked."""
    return _rowwise(_entropy, logits, None, chunk_rows)


__all__ = ["head_chosen_logp", "selective_log_softmax", "tempers", "token_entropy_from_logits"]
