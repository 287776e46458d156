"""On-policy distillation as an advantage term: a teacher's per-token judgement of the policy's own samples.

The policy samples as in RL (o_i ~ pi_s, with the sampler's log-probs recorded); a teacher scores the same token ids.
Per token, the log ratio

    d_it = sampler_logp_it - teacher_logp_it          (B, T)

is a one-sample estimate of the reverse KL, KL(pi_s || pi_t) = E_{o ~ pi_s} [log pi_s(o) - log pi_t(o)], at that
position: positive where the student puts more probability on its token than the teacher does. Minimising the reverse
KL by the policy gradient gives each sampled token the reward -d_it, so the token's advantage becomes

    A_it = v * A_i - coef * clip(sg[d_it], -c, c)      (B, T), 0 off the mask

with A_i the verifier's group advantage (v = 1) or nothing (v = 0: distillation alone). The clip bounds one token's
term by c nats (DistillConfig.clip, 2 by default: a token the teacher finds e^2 = 7x less likely than the student does
already counts in full), so a token the teacher all but forbids (log-prob -30) cannot outweigh a whole completion's
verifier signal. With coef = 0 the caller keeps the (B,) advantages as they are: nothing here runs.

Shapes: B rows, T completion positions; mask (B, T) is 1.0 on the tokens the loss trains (the policy's own: an
episode's environment ids are 0). Pure tensors in, tensors out.
"""

from __future__ import annotations

import torch


def distill_advantages(
    adv: torch.Tensor,
    sampler_logp: torch.Tensor,
    teacher_logp: torch.Tensor,
    mask: torch.Tensor,
    *,
    coef: float,
    clip: float,
    verifier: bool = True,
    control: str = "none",
) -> torch.Tensor:
    """A_it = v A_i - coef * clip(d_it, -clip, clip), d_it = sampler_logp - teacher_logp, zero off the mask.

    adv (B,) the verifier's group advantages; sampler_logp, teacher_logp, mask (B, T) -> (B, T) float32.
    control "constant": every token's clip(d_it) replaced by their mean over the masked tokens (the control run that
    keeps the term's size and drops the teacher's per-token information).
    """
    d = (sampler_logp - teacher_logp).clamp(-clip, clip)
    if control == "constant":
        d = torch.full_like(d, float((d * mask).sum() / mask.sum().clamp(min=1)))
    base = adv.float()[:, None] if verifier else torch.zeros_like(adv, dtype=torch.float32)[:, None]
    return torch.where(mask > 0, base - coef * d.float(), torch.zeros_like(d, dtype=torch.float32))


def distill_sums(
    base: torch.Tensor,
    token_adv: torch.Tensor,
    sampler_logp: torch.Tensor,
    teacher_logp: torch.Tensor,
    mask: torch.Tensor,
    clip: float,
) -> dict[str, float]:
    """Sums over the masked tokens for the step's figures (added across ranks, then divided: distill_figures).

    base (B,): the verifier's part of each row's advantage (v A_i: zeros for distillation alone); token_adv (B, T):
    distill_advantages' result; the rest (B, T). Sums: tokens; reverse_kl (of d_it, unclipped); clipped (tokens
    with |d_it| > clip); term (of |A_it - v A_i|, the teacher's part); verifier (of |v A_i|, per token)."""
    m = mask > 0
    d = (sampler_logp - teacher_logp)[m]
    per_token_base = base.float()[:, None].expand_as(token_adv)[m]
    return {
        "tokens": float(m.sum()),
        "reverse_kl": float(d.sum()),
        "clipped": float((d.abs() > clip).sum()),
        "term": float((token_adv[m] - per_token_base).abs().sum()),
        "verifier": float(per_token_base.abs().sum()),
    }


SUM_KEYS = ("tokens", "reverse_kl", "clipped", "term", "verifier")


def distill_figures(sums: dict[str, float]) -> dict[str, float]:
    """The metrics line's distill/* figures from `distill_sums`' sums (docs/metrics.md):
    distill/reverse_kl   the sampled reverse KL to the teacher, nats per token (mean d_it)
    distill/clipped_frac the share of tokens whose |d_it| passed the clip
    distill/share        the teacher's term's share of the advantage: sum |term| / (sum |term| + sum |v A_i|)
    distill/tokens       the tokens scored"""
    n = max(sums["tokens"], 1.0)
    total = sums["term"] + sums["verifier"]
    return {
        "distill/reverse_kl": sums["reverse_kl"] / n,
        "distill/clipped_frac": sums["clipped"] / n,
        "distill/share": sums["term"] / total if total > 0 else 0.0,
        "distill/tokens": sums["tokens"],
    }


__all__ = ["SUM_KEYS", "distill_advantages", "distill_sums", "distill_figures"]
