"""How far the sampler's probabilities are from the trainer's, on the tokens the sampler drew.

The fast sampler (bf16 kernels, a hand-written forward), vLLM or a remote server compute log-probs with other
kernels than the update; wherever they differ, the update's gradient is an on-policy gradient for a policy that
did not sample the tokens. These figures say by how much, every step, from numbers the step already has: the
sampler's `sampler_logp` and the update's own first-forward log-probs of the same tokens (no extra forward).

Per token, r = logp_trainer - logp_sampler, the log of the importance ratio pi_train / pi_sampler. Over the
N tokens measured:

    k3_kl         (1/N) sum (exp(r) - 1 - r)      Schulman's k3 estimate of KL(sampler || trainer): tokens are
                                                  drawn from the sampler, so E_sampler[exp(r)] = 1 and the mean
                                                  of exp(r) - 1 - r (>= 0 per token) is an unbiased KL estimate
    abs_log_ratio (1/N) sum |r|
    max_ratio     max exp(r)                      the largest weight a token-level correction would start from
    outside_frac  (1/N) #{r : exp(r) < 1/C or exp(r) > C}
                                                  the tokens a masked correction with cap C would drop

Sums are kept apart from means (`mismatch_sums`, `merge_sums`, `mismatch_figures`) so that micro-batches and
data-parallel ranks add up to the whole batch's figures exactly.
"""

from __future__ import annotations

import math

import torch

from rlvr.config import DEFAULTS

# The default cap C of `outside_frac`, log.mismatch_cap's default (set once, in rlvr.config): a token whose two
# probabilities differ by more than a factor 2. It is the cap the truncated and masked corrections in verl use by
# default (TRL's masked sequence weight uses 3), so the figure reads as "the share of tokens such a correction would
# touch".
DEFAULT_CAP: float = DEFAULTS["log"]["mismatch_cap"]

# exp() of a log-ratio past this overflows float32; a token this far off is counted, its size capped.
_MAX_LOG_RATIO = 20.0

SUM_KEYS = ("tokens", "k3", "abs_log_ratio", "outside", "max_log_ratio")


def mismatch_sums(
    trainer_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor, cap: float = DEFAULT_CAP
) -> dict[str, float]:
    """The sums behind the figures over one batch's measured tokens.

    trainer_logp, sampler_logp: (B, T) log-probs of the same sampled tokens (the update's, the sampler's);
    mask: (B, T), 1.0 on tokens to measure. cap: C > 1. Returns {"tokens", "k3", "abs_log_ratio", "outside",
    "max_log_ratio"} as floats: the token count, the sums of exp(r) - 1 - r, of |r| and of tokens outside
    [1/C, C], and the largest r (-inf over no tokens). Gradients are not tracked.
    """
    if cap <= 1:
        raise ValueError(f"the mismatch cap must be > 1, got {cap}")
    if trainer_logp.shape != sampler_logp.shape or trainer_logp.shape != mask.shape:
        raise ValueError(
            f"shapes differ: trainer {tuple(trainer_logp.shape)}, sampler {tuple(sampler_logp.shape)}, "
            f"mask {tuple(mask.shape)}"
        )
    with torch.no_grad():
        keep = mask.detach() > 0
        r = (trainer_logp.detach().float() - sampler_logp.detach().float())[keep]
        r = r.clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
        # k3 = exp(r) - 1 - r with r = log(pi_train / pi_sampler), tokens drawn from the sampler: KL(sampler || train)
        k3 = torch.expm1(r) - r
        outside = (r.abs() > math.log(cap)).sum()
        return {
            "tokens": float(r.numel()),
            "k3": float(k3.sum()),
            "abs_log_ratio": float(r.abs().sum()),
            "outside": float(outside),
            "max_log_ratio": float(r.max()) if r.numel() else -math.inf,
        }


def merge_sums(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    """Two batches' sums as one batch's: counts and sums add, the largest log ratio is the larger."""
    return {k: max(a[k], b[k]) if k == "max_log_ratio" else a[k] + b[k] for k in SUM_KEYS}


def empty_sums() -> dict[str, float]:
    """The sums over no tokens (the start of an accumulation)."""
    return {"tokens": 0.0, "k3": 0.0, "abs_log_ratio": 0.0, "outside": 0.0, "max_log_ratio": -math.inf}


def mismatch_figures(sums: dict[str, float]) -> dict[str, float]:
    """The metrics line's figures from the sums: mismatch/k3_kl, mismatch/abs_log_ratio, mismatch/max_ratio,
    mismatch/outside_frac, mismatch/tokens. Over no tokens: {} (no figure rather than a made-up 0)."""
    n = sums["tokens"]
    if n <= 0:
        return {}
    return {
        "mismatch/k3_kl": sums["k3"] / n,
        "mismatch/abs_log_ratio": sums["abs_log_ratio"] / n,
        "mismatch/max_ratio": math.exp(sums["max_log_ratio"]),
        "mismatch/outside_frac": sums["outside"] / n,
        "mismatch/tokens": int(n),
    }


__all__ = ["DEFAULT_CAP", "SUM_KEYS", "mismatch_sums", "merge_sums", "empty_sums", "mismatch_figures"]
