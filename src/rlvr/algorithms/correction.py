"""Rollout correction: the sampler drew the tokens, the trainer computes their probabilities; where the two differ
(bf16 kernels, another engine) the update is off-policy by a little. Each correction is a registered pure function

    weight, keep = ROLLOUT_CORRECTIONS[name](logp (B, T), sampler_logp (B, T), mask (B, T), cap)

returning a per-token importance weight (B, T), detached, that multiplies the per-token loss, and a 0/1 mask (B, T)
of the tokens (or whole sequences) that stay in it. `logp` is the trainer's log-prob of the sampled token (the
"old" policy of the step, before any update), `sampler_logp` the sampler's. With r = exp(logp - sampler_logp):

    none            weight 1, every token kept: the update treats the samples as on-policy (the default)
    truncated       token-level truncated importance sampling: weight min(r_t, cap)
    masked-token    tokens whose r_t lies outside [1/cap, cap] leave the loss; weight 1 for the rest
    masked-sequence whole sequences leave the loss when their ratio exp(mean_t log r_t) lies outside [1/cap, cap]:
                    the *mean* of the token log ratios, not their sum, so a long sequence is not dropped for being long

`algorithm.rollout_correction` names one (or `package.module:attr`), `algorithm.correction_cap` sets the cap.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from rlvr.registry import Registry

# (logp (B, T), sampler_logp (B, T), mask (B, T), cap) -> (weight (B, T), keep (B, T))
Correction = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float], tuple[torch.Tensor, torch.Tensor]]
ROLLOUT_CORRECTIONS: Registry[Correction] = Registry("rollout correction", key="algorithm.rollout_correction")


def _log_ratio(logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """log r_t = logp_t - sampler_logp_t on the policy's tokens, 0 elsewhere (B, T), detached."""
    return torch.where(mask > 0, logp.detach() - sampler_logp, torch.zeros_like(logp))


@ROLLOUT_CORRECTIONS.register("none")
def no_correction(
    logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor, cap: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The samples taken as on-policy: weight 1, every token kept."""
    return torch.ones_like(logp), torch.ones_like(mask)


@ROLLOUT_CORRECTIONS.register("truncated")
def truncated_weight(
    logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor, cap: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Truncated importance sampling per token: weight min(pi_train / pi_sampler, cap), detached."""
    return torch.exp(_log_ratio(logp, sampler_logp, mask)).clamp(max=cap), torch.ones_like(mask)


@ROLLOUT_CORRECTIONS.register("masked-token")
def masked_token(
    logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor, cap: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked importance sampling per token: tokens whose ratio lies outside [1/cap, cap] leave the loss."""
    log_r = _log_ratio(logp, sampler_logp, mask)
    keep = (log_r.abs() <= math.log(cap)).to(mask.dtype)
    return torch.ones_like(logp), keep


@ROLLOUT_CORRECTIONS.register("masked-sequence")
def masked_sequence(
    logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor, cap: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked importance sampling per sequence, from the mean token log ratio: outside [1/cap, cap] drops the row."""
    log_r = _log_ratio(logp, sampler_logp, mask)
    mean = log_r.sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1)
    keep = (mean.abs() <= math.log(cap)).to(mask.dtype).expand_as(mask)
    return torch.ones_like(logp), keep.contiguous()


def corrects(name: str) -> bool:
    """Whether the named correction changes the loss: every entry but the one that takes the samples as on-policy
    (none), which the loss skips, and whose figures (correction/*) a step does not report."""
    return ROLLOUT_CORRECTIONS.get(name) is not no_correction


__all__ = ["ROLLOUT_CORRECTIONS", "corrects", "no_correction", "truncated_weight", "masked_token", "masked_sequence"]
