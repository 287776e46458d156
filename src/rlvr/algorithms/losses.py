"""The policy loss as three registered pieces: a ratio level, a surrogate and an aggregation; plus the k3 KL.

    log_ratio = RATIO_LEVELS[ratio](logp, old_logp, mask)            (B, T)
    per_token = SURROGATES[surrogate](log_ratio, adv, clip_low, clip_high)   (B, T)  [+ beta * k3 KL]
    loss      = AGGREGATIONS[agg](per_token * mask, mask, n_tok, n_seq, norm_len)   0-d

GRPO, DAPO, GSPO and Dr. GRPO are choices of these names (rlvr.algorithms.presets). A new objective (CISPO, SAPO,
a truncated importance weight) is a new function in one of these registries, added here or given as
`package.module:attr` in `algorithm.surrogate` / `algorithm.ratio` / `algorithm.agg`: never a new branch.

Shapes: B rows (completions), T completion positions. `mask` (B, T) is 1.0 on sampled tokens that
count and 0.0 on padding (and on whole rows that a filter dropped). Every function takes plain numbers
and tensors and returns tensors: nothing here calls `.item()`, so nothing forces a device sync.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlvr.registry import Registry

Count = torch.Tensor | float  # a denominator: a 0-d tensor (batch_counts) or a number
# (logp, old_logp, mask) -> log importance ratio per token (B, T)
RatioLevel = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
RATIO_LEVELS: Registry[RatioLevel] = Registry("loss ratio level", key="algorithm.ratio")
# (log_ratio (B, T), adv (B, 1) or per token (B, T), clip_low, clip_high) -> per-token loss to minimise (B, T)
Surrogate = Callable[[torch.Tensor, torch.Tensor, float, float], torch.Tensor]
SURROGATES: Registry[Surrogate] = Registry("loss surrogate", key="algorithm.surrogate")
# (masked per-token loss (B, T), mask (B, T), n_tok, n_seq, norm_len) -> 0-d loss
Aggregation = Callable[[torch.Tensor, torch.Tensor, Count, Count, float], torch.Tensor]
AGGREGATIONS: Registry[Aggregation] = Registry("loss aggregation", key="algorithm.agg")

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


def _count(n: Count, like: torch.Tensor) -> torch.Tensor:
    """A denominator as a tensor on like's device, at least 1 so an empty batch gives 0, not NaN."""
    return torch.as_tensor(n, dtype=like.dtype, device=like.device).clamp(min=1)


@AGGREGATIONS.register("token-mean")
def token_mean(masked: torch.Tensor, mask: torch.Tensor, n_tok: Count, n_seq: Count, norm_len: float) -> torch.Tensor:
    """DAPO: sum_{i,t} m_it l_it / N_tok, every token weighs the same."""
    return masked.sum() / _count(n_tok, masked)


@AGGREGATIONS.register("seq-mean-token-mean")
def seq_mean_token_mean(
    masked: torch.Tensor, mask: torch.Tensor, n_tok: Count, n_seq: Count, norm_len: float
) -> torch.Tensor:
    """GRPO, GSPO: (1/N_seq) sum_i [sum_t m_it l_it / |o_i|], every sequence weighs the same."""
    # |o_i| clamped to 1 so an all-masked row contributes 0 instead of 0/0
    seq_means = masked.sum(-1) / mask.sum(-1).clamp(min=1)
    return seq_means.sum() / _count(n_seq, masked)


@AGGREGATIONS.register("seq-mean-token-sum-norm")
def seq_mean_token_sum_norm(
    masked: torch.Tensor, mask: torch.Tensor, n_tok: Count, n_seq: Count, norm_len: float
) -> torch.Tensor:
    """Dr. GRPO: sum_{i,t} m_it l_it / (N_seq * norm_len), a constant normaliser: no length bias."""
    return masked.sum() / (_count(n_seq, masked) * norm_len)


def aggregate(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    *,
    norm_len: float | None = None,
    num_tokens: Count | None = None,
    num_seqs: Count | None = None,
) -> torch.Tensor:
    """Reduce a per-token loss (B, T) to a scalar, the way each paper does: AGGREGATIONS[mode].

    N_tok, N_seq default to this batch's counts (see `batch_counts`); pass the full batch's counts to
    make micro-batch losses sum to the full-batch loss exactly. norm_len defaults to T (mask.shape[-1]);
    pass the generation budget (max new tokens) so it does not depend on a micro-batch's padding.
    """
    reduce = AGGREGATIONS.get(mode)
    mask = mask.to(per_token.dtype)
    local_tokens, local_seqs = batch_counts(mask)
    n_tok = local_tokens if num_tokens is None else num_tokens
    n_seq = local_seqs if num_seqs is None else num_seqs
    length = float(mask.shape[-1] if norm_len is None else norm_len)
    return reduce(per_token * mask, mask, n_tok, n_seq, length)


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || pi_ref), per token: (B, T), (B, T) -> (B, T).

    With x = ref_logp - logp:  k3 = exp(x) - x - 1  (>= 0, unbiased, low variance).
    Gradient w.r.t. logp: 1 - exp(x), i.e. it pulls logp toward ref_logp.
    """
    x = (ref_logp - logp).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    return torch.exp(x) - x - 1.0


@RATIO_LEVELS.register("token")
def token_log_ratio(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """PPO / GRPO: log r_it = logp_it - old_logp_it, per token."""
    return (logp - old_logp).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)


@RATIO_LEVELS.register("sequence")
def sequence_log_ratio(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """GSPO: one length-normalised ratio per sequence, with each token's gradient.

    log s_i = (1/|o_i|) sum_t m_it (logp_it - old_logp_it), and each token uses
    log s_it = sg[log s_i] + logp_it - sg[logp_it], whose value is log s_i and whose
    gradient is that of logp_it, so d s_it = s_i * d logp_it for every token.
    """
    delta = logp - old_logp
    mask = mask.to(delta.dtype)
    seq = (delta * mask).sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1)
    seq = seq.clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    return seq.detach() + logp - logp.detach()


def log_ratio(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor, level: str) -> torch.Tensor:
    """Log importance ratio per token (B, T) at `level` ("token", "sequence", or a registered/plug-in level)."""
    return RATIO_LEVELS.get(level)(logp, old_logp, mask)


@SURROGATES.register("clip")
def clipped_surrogate(log_r: torch.Tensor, adv: torch.Tensor, clip_low: float, clip_high: float) -> torch.Tensor:
    """PPO's clipped surrogate (GRPO, DAPO, GSPO, Dr. GRPO): l = -min(r A, clip(r, 1 - eps_low, 1 + eps_high) A).

    log_r (B, T), adv (B, 1) or (B, T) -> (B, T). Where the clipped branch is strictly larger it is constant in theta:
    those tokens get no gradient.
    """
    r = torch.exp(log_r)
    unclipped = -r * adv
    clipped = -r.clamp(1.0 - clip_low, 1.0 + clip_high) * adv
    return torch.where(clipped > unclipped, clipped, unclipped)


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1)


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor | None,
    adv: torch.Tensor,
    mask: torch.Tensor,
    *,
    ratio: str = "token",
    surrogate: str = "clip",
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    agg: str = "token-mean",
    ref_logp: torch.Tensor | None = None,
    beta: float = 0.0,
    norm_len: float | None = None,
    num_tokens: Count | None = None,
    num_seqs: Count | None = None,
    sampler_logp: torch.Tensor | None = None,
    rollout_correction: str = "none",
    correction_cap: float = 2.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The policy loss of GRPO / DAPO / GSPO / Dr. GRPO (and any registered variant), as one scalar to minimise.

    logp, old_logp, ref_logp, mask: (B, T); adv: (B,), or (B, T) per token (rlvr.algorithms.distill). old_logp=None means "one update per rollout
    batch": the old policy is the current one, so the ratio is exp(logp - sg[logp]) = 1 with the
    right gradient, and no second forward pass is needed.
    Returns (loss 0-d, stats) with stats "clip/low_frac", "clip/high_frac", "ratio/mean" and, when
    beta > 0, "kl": 0-d tensors over the unmasked tokens of this batch, detached. The clip fractions say where
    the ratio lies against [1 - clip_low, 1 + clip_high] on the side that its advantage makes binding.
    rollout_correction (rlvr.algorithms.correction) with sampler_logp (B, T): each token's loss times the
    correction's detached weight, or 0 where it drops the token; the denominators stay the batch's (a dropped token
    counts as a zero loss, so micro-batches still sum to the batch). Stats then add "correction/ratio_mean" (the
    sampler ratio before the cap), "correction/weight_mean" (after it) and "correction/kept_frac".
    """
    old = logp.detach() if old_logp is None else old_logp
    mask = mask.to(logp.dtype)
    log_r = log_ratio(logp, old, mask, ratio)
    a = adv.to(logp.dtype)
    a = a if a.dim() == 2 else a.unsqueeze(-1)  # per token (B, T) where a term needs it (distillation), else (B, 1)
    per_token = SURROGATES.get(surrogate)(log_r, a, clip_low, clip_high)
    correction: dict[str, torch.Tensor] = {}
    if _corrects(rollout_correction):
        per_token, correction = _corrected(per_token, old, sampler_logp, mask, rollout_correction, correction_cap)
    r = torch.exp(log_r.detach())
    stats = {
        "clip/low_frac": _masked_mean(((r < 1.0 - clip_low) & (a < 0)).to(mask.dtype), mask).detach(),
        "clip/high_frac": _masked_mean(((r > 1.0 + clip_high) & (a > 0)).to(mask.dtype), mask).detach(),
        "ratio/mean": _masked_mean(r, mask).detach(),
        **correction,
    }
    if beta > 0:
        if ref_logp is None:
            raise ValueError("beta > 0 needs ref_logp (the reference policy's log-probs)")
        kl = kl_k3(logp, ref_logp)
        # J = surrogate + beta * KL(pi || pi_ref), KL estimated per token by k3
        per_token = per_token + beta * kl
        stats["kl"] = _masked_mean(kl, mask).detach()
    loss = aggregate(per_token, mask, agg, norm_len=norm_len, num_tokens=num_tokens, num_seqs=num_seqs)
    return loss, stats


def _corrects(name: str) -> bool:
    from rlvr.algorithms.correction import corrects

    return corrects(name)


def _corrected(
    per_token: torch.Tensor,
    old_logp: torch.Tensor,
    sampler_logp: torch.Tensor | None,
    mask: torch.Tensor,
    name: str,
    cap: float,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """(per-token loss times the rollout correction's weight and kept mask, its figures over the batch's tokens)."""
    from rlvr.algorithms.correction import ROLLOUT_CORRECTIONS

    if sampler_logp is None:
        raise ValueError(f"rollout_correction={name!r} needs the sampler's log-probs (sampler_logp)")
    weight, keep = ROLLOUT_CORRECTIONS.get(name)(old_logp, sampler_logp, mask, cap)
    ratio = torch.exp(torch.where(mask > 0, old_logp.detach() - sampler_logp, torch.zeros_like(old_logp)))
    figures = {
        "correction/ratio_mean": _masked_mean(ratio, mask).detach(),
        "correction/weight_mean": _masked_mean(weight * keep, mask).detach(),
        "correction/kept_frac": _masked_mean(keep, mask).detach(),
    }
    return per_token * (weight * keep).detach(), figures


__all__ = [
    "AGGREGATIONS",
    "RATIO_LEVELS",
    "SURROGATES",
    "batch_counts",
    "aggregate",
    "kl_k3",
    "log_ratio",
    "policy_loss",
    "clipped_surrogate",
    "token_log_ratio",
    "sequence_log_ratio",
]
