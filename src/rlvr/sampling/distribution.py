"""The sampling distribution, written to match transformers' warpers (temperature, then top-k, then top-p)
so that our fast sampler and HF `generate` draw from the same distribution given the same logits.

All numerics here run in float32 whatever the model's compute dtype.

A large vocabulary is sampled a few rows at a time (`sample_tokens`): at Gemma 3's 262,144 tokens, 64 rows' float32
scores are 67 MB, and each such buffer, allocated afresh at every decode step, cost about 1 ms a MB in page faults
here (the allocator maps anything over 32 MB anew each time) on top of passes that no longer fit a cache. Chunks of
8 MB reuse the allocator's memory and stay in the cache; each row's arithmetic and its uniform draw (in row order) are
those of the whole batch.
"""

from __future__ import annotations

import torch

WHOLE_BYTES = 16 << 20  # float32 scores up to this size are sampled in one piece (SmolLM2's 49,152 x 64 rows: 12.6 MB)
CHUNK_BYTES = 8 << 20  # otherwise, rows a chunk: Gemma 3's 262,144 tokens, 8 rows


def truncate(scores: torch.Tensor, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """Mask (to -inf) the tokens outside top-k, then outside the top-p nucleus, as HF's warpers do.

    scores: (N, V) float32, already divided by the temperature. Returns a new (N, V) tensor.
    top-k keeps the k largest (ties at the k-th value kept, as HF). top-p keeps the smallest prefix of the
    descending order whose mass reaches top_p: a token goes when the mass strictly above it is >= top_p,
    which is HF's ascending-cumsum rule `cumsum <= 1 - top_p` read from the other end. The best token
    always stays.
    """
    out = scores
    if top_k and top_k < scores.shape[-1]:
        kth = torch.topk(out, top_k, dim=-1).values[..., -1:]
        out = out.masked_fill(out < kth, float("-inf"))
    if top_p < 1.0:
        out = _nucleus(out, top_p)
    return out


def _nucleus(scores: torch.Tensor, top_p: float, candidates: int = 512) -> torch.Tensor:
    """Top-p masking. A token goes when the mass strictly above it is >= top_p. When the `candidates`
    most likely tokens already hold top_p of the mass in every row, the nucleus lies inside them and a
    partial top-k replaces a full-vocabulary sort (about 10x cheaper at V = 49,152); otherwise sort."""
    V = scores.shape[-1]
    probs = scores.softmax(dim=-1)
    if candidates < V:
        top, idx = probs.topk(candidates, dim=-1)  # descending
        if bool((top.sum(dim=-1) >= top_p).all()):
            keep = (top.cumsum(dim=-1) - top) < top_p
            keep[..., 0] = True
            drop = torch.ones_like(scores, dtype=torch.bool).scatter_(-1, idx, ~keep)
            return scores.masked_fill(drop, float("-inf"))
    sorted_probs, order = torch.sort(probs, dim=-1, descending=False)
    drop_sorted = sorted_probs.cumsum(dim=-1) <= (1.0 - top_p)  # HF's rule, read from the small end
    drop_sorted[..., -1:] = False
    return scores.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), float("-inf"))


def sample_tokens(
    logits: torch.Tensor,
    *,
    temperature: float,
    top_k: int = 0,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw one token per row and return (tokens (N,) long, logp (N,) float32).

    logits: (N, V), any float dtype. logp is log softmax(logits / temperature) at the drawn token, before
    truncation (the contract of Rollouts.sampler_logp). temperature == 0 is greedy; its logp is taken at
    temperature 1 (the model's own distribution), the only finite choice that still carries information.
    Rows whose float32 scores pass WHOLE_BYTES go CHUNK_BYTES at a time (the module's docstring says why).
    """
    N, V = logits.shape
    rows = max(1, CHUNK_BYTES // (4 * V))
    if 4 * N * V <= WHOLE_BYTES or N <= rows:
        return _sample_rows(logits, temperature, top_k, top_p, generator)
    parts = [_sample_rows(logits[i : i + rows], temperature, top_k, top_p, generator) for i in range(0, N, rows)]
    return torch.cat([t for t, _ in parts]), torch.cat([lp for _, lp in parts])


def _sample_rows(
    logits: torch.Tensor, temperature: float, top_k: int, top_p: float, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """sample_tokens on rows sampled in one piece."""
    if temperature == 0:
        scores = logits.float()
        tokens = scores.argmax(dim=-1)
        return tokens, scores.gather(-1, tokens[:, None]).squeeze(-1) - torch.logsumexp(scores, dim=-1)
    if not (top_k or top_p < 1.0):
        return _sample_untruncated(logits, temperature, generator)
    scores = logits.to(torch.float32, copy=True)  # the in-place ops below never touch the caller's tensor
    scores.mul_(1.0 / temperature)
    top = scores.amax(dim=-1, keepdim=True)
    lse = torch.logsumexp(scores, dim=-1)
    weights = truncate(scores, top_k, top_p).sub_(top).exp_()
    tokens, _ = inverse_cdf(weights, generator)
    return tokens, scores.gather(-1, tokens[:, None]).squeeze(-1) - lse


def _sample_untruncated(logits: torch.Tensor, temperature: float, generator: torch.Generator | None):
    """sample_tokens without truncation, in at most five passes over (N, V) (the decode step's common case):
    the weights exp(s - max) are made in place, and the drawn token's score is recomputed from `logits`
    with the same float32 multiply, so it is bit-equal to the score its weight came from."""
    scores = logits.to(torch.float32, copy=True)
    if temperature != 1.0:
        scores.mul_(1.0 / temperature)
    top = scores.amax(dim=-1, keepdim=True)
    tokens, total = inverse_cdf(scores.sub_(top).exp_(), generator)
    lse = top.squeeze(-1) + total.log()  # untruncated weights: their total is the partition function
    picked = logits.gather(-1, tokens[:, None]).squeeze(-1).float()
    if temperature != 1.0:
        picked.mul_(1.0 / temperature)
    return tokens, picked - lse


def inverse_cdf(
    weights: torch.Tensor, generator: torch.Generator | None, block: int = 256
) -> tuple[torch.Tensor, torch.Tensor]:
    """One draw per row from unnormalised non-negative weights (N, V): the first index whose running sum
    exceeds u * total, u ~ U[0, 1). Same distribution as torch.multinomial, which on CPU draws V
    exponentials per row and cost ~7x more here at V = 49,152. Zero-weight tokens can never be chosen.

    Two levels, so that no running sum spans the vocabulary (a full-row cumsum is a serial scan, ~1 ms
    per step at N = 32): pick the block of `block` tokens by the running sum of block totals, then the
    token inside that block. Returns (tokens (N,) long, total weight (N,))."""
    N, V = weights.shape
    whole = V - V % block
    sums = weights[:, :whole].reshape(N, whole // block, block).sum(dim=-1)
    if whole < V:
        sums = torch.cat([sums, weights[:, whole:].sum(dim=-1, keepdim=True)], dim=-1)
    cdf = sums.cumsum(dim=-1)  # (N, blocks)
    total = cdf[:, -1]
    u = torch.rand(N, 1, generator=generator) * total[:, None]
    u = torch.minimum(u, _below(total[:, None]))  # u < total even after rounding, so j has weight
    j = torch.searchsorted(cdf, u, right=True)  # first block whose running sum exceeds u
    start = j * block
    u = u - torch.where(j > 0, cdf.gather(-1, (j - 1).clamp(min=0)), 0.0)
    index = start + torch.arange(block)
    inner = weights.gather(-1, index.clamp(max=V - 1)).masked_fill_(index >= V, 0.0).cumsum_(dim=-1)
    u = torch.minimum(u.clamp_(min=0.0), _below(inner[:, -1:]))
    k = torch.searchsorted(inner, u, right=True)
    return (start + k).squeeze(-1), total


def _below(x: torch.Tensor) -> torch.Tensor:
    """The largest float below each (positive) x."""
    return torch.nextafter(x, torch.zeros_like(x))
