"""The sampling distribution, written to match transformers' warpers (temperature, then top-k, then top-p)
so that our fast sampler and HF `generate` draw from the same distribution given the same logits.

All numerics here run in float32 whatever the model's compute dtype.
"""
from __future__ import annotations

import torch


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
        sorted_scores, order = torch.sort(out, dim=-1, descending=False)
        cum = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
        drop_sorted = cum <= (1.0 - top_p)
        drop_sorted[..., -1:] = False
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        out = out.masked_fill(drop, float("-inf"))
    return out


def sample_tokens(logits: torch.Tensor, *, temperature: float, top_k: int = 0, top_p: float = 1.0,
                  generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw one token per row and return (tokens (N,) long, logp (N,) float32).

    logits: (N, V), any float dtype. logp is log softmax(logits / temperature) at the drawn token, before
    truncation (the contract of Rollouts.sampler_logp). temperature == 0 is greedy; its logp is taken at
    temperature 1 (the model's own distribution), the only finite choice that still carries information.
    """
    scores = logits.float()
    if temperature == 0:
        tokens = scores.argmax(dim=-1)
        return tokens, _logp_at(scores, tokens)
    scores = scores / temperature
    logp_all_at = _logp_at(scores, None)
    warped = truncate(scores, top_k, top_p) if (top_k or top_p < 1.0) else scores
    probs = warped.softmax(dim=-1)
    tokens = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    return tokens, logp_all_at(tokens)


def _logp_at(scores: torch.Tensor, tokens: torch.Tensor | None):
    """log_softmax(scores) gathered at tokens; with tokens None, return the gather as a function."""
    lse = torch.logsumexp(scores, dim=-1)

    def at(tok: torch.Tensor) -> torch.Tensor:
        return scores.gather(-1, tok[:, None]).squeeze(-1) - lse

    return at(tokens) if tokens is not None else at
