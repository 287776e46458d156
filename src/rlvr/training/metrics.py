"""The per-step metrics line (names kept stable: see DESIGN.md) from a step's batch and update stats."""

from __future__ import annotations

from rlvr.algorithms.advantages import nonzero_variance_frac
from rlvr.verifiers.base import STATUSES


def rollout_metrics(batch) -> dict:
    """Reward, verdict, group and length figures over every row generated this step (B > 0)."""
    n = len(batch)
    out = {
        "reward/mean": float(batch.rewards.mean()),
        "groups/nonzero_var_frac": float(nonzero_variance_frac(batch.rewards, batch.group_ids)),
        "len/mean": float(batch.lengths.float().mean()),
        "len/max": float(batch.lengths.max()),
        "len/truncated_frac": sum(f == "length" for f in batch.finish) / n,
        "entropy": sampled_entropy(batch),
    }
    for name, values in batch.terms.items():
        out[f"reward/{name}/mean"] = sum(values) / n
    for status in STATUSES:
        out[f"verdict/{status}_frac"] = sum(v.status == status for v in batch.verdicts) / n
    return out


def sampled_entropy(batch) -> float:
    """Mean over sampled tokens of -log p(token): an unbiased estimate of the policy's per-token entropy at the
    sampling temperature, free because the sampler records log p. Covers every row, trained or not."""
    t = batch.sampler_logp.shape[1]
    sampled = (batch.lengths[:, None] > batch.lengths.new_tensor(range(t))[None, :]).float()
    return float(-(batch.sampler_logp * sampled).sum() / sampled.sum().clamp(min=1))
