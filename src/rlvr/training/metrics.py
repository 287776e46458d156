"""The per-step metrics line (names kept stable: the README lists them) from a step's batch and update stats."""

from __future__ import annotations

import torch

from rlvr.algorithms.advantages import nonzero_variance_frac, shaping_only_groups
from rlvr.environments.figures import episode_sample
from rlvr.verifiers.base import FAULT_STATUSES
from rlvr.verifiers.compose import verdict_fractions


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
    out.update(verdict_fractions(batch.verdicts))
    return out


def shaping_figures(batch) -> dict:
    """groups/shaping_only_frac: the share of the kept batch's groups whose rewards differ while the correctness term
    (the reward's first: rlvr.verifiers.compose) is the same on every sample; adv/shaping_only_share: their share of
    the step's advantage mass, sum |A_it| over the trained tokens (rlvr.algorithms.advantages.shaping_only_groups).
    {} without reward terms (an environment's reward) or advantages."""
    graded = batch.graded()
    if graded is None or batch.advantages is None or not len(batch):
        return {}
    groups = batch.group_ids.cpu()
    rows = shaping_only_groups(batch.rewards.cpu(), graded, groups)
    adv = batch.advantages.detach().cpu()
    mass = (adv.abs() if adv.dim() == 2 else adv.abs()[:, None]) * batch.mask.cpu()
    per_row = mass.sum(dim=1)
    return {
        "groups/shaping_only_frac": len(groups[rows].unique()) / len(groups.unique()),
        "adv/shaping_only_share": float(per_row[rows].sum() / per_row.sum()) if per_row.sum() > 0 else 0.0,
    }


def sampled_entropy(batch) -> float:
    """Mean over sampled tokens of -log p(token): an unbiased estimate of the policy's per-token entropy at the
    sampling temperature, free because the sampler records log p. Covers every row, trained or not; in an episode,
    only the policy's ids (an environment's ids carry log p 0 and were not sampled)."""
    t = batch.sampler_logp.shape[1]
    sampled = (batch.lengths[:, None] > batch.lengths.new_tensor(range(t))[None, :]).float()
    if batch.episodes is not None and len(batch.episodes) == len(sampled):
        for row, ep in enumerate(batch.episodes):
            sampled[row, : len(ep.mask)] *= torch.tensor(ep.mask, dtype=sampled.dtype)
    return float(-(batch.sampler_logp * sampled).sum() / sampled.sum().clamp(min=1))


def step_metrics_row(step, batch, generated, upd, lr, t_rollout, t_train) -> dict:
    """The step's line: rollout figures over every generated row, update figures over the kept batch."""
    row = {"step": step, **rollout_metrics(generated), **shaping_figures(batch)}
    row.update({k: v for k, v in upd.items() if k not in ("train_tokens",)})
    gen_time = batch.stats["time/generate"]
    row.update(
        {
            "lr": lr,
            "time/generate": gen_time,
            "time/verify": batch.stats["time/verify"],
            "time/train": t_train,
            "time/step": t_rollout + t_train,
            "throughput/gen_tok_s": batch.stats["gen_tokens"] / max(gen_time, 1e-9),
            "throughput/train_tok_s": upd.get("train_tokens", 0) / max(t_train, 1e-9),
            "dynamic_sampling/generated_groups": batch.stats["dynamic_sampling/generated_groups"],
            "dynamic_sampling/kept_groups": batch.stats["dynamic_sampling/kept_groups"],
        }
    )
    return row


def sample_rows(step, batch) -> list[dict]:
    """samples.jsonl lines: each row's problem, completion, extracted answer, verdict (a fault's with its detail) and
    reward; for an episode also its messages, per-turn token counts, tool calls by outcome and what ended it."""
    rows = [
        {
            "step": step,
            "problem_id": p.id,
            "band": p.band,
            "prompt": p.prompt,
            "gold": p.answer,
            "completion": text,
            "extracted": v.extracted,
            "status": v.status,
            "reward": float(r),
        }
        for p, text, v, r in zip(batch.problems, batch.texts, batch.verdicts, batch.rewards.tolist())
    ]
    for row, v in zip(rows, batch.verdicts):  # why the grader gave no verdict: what the no-signal warning points to
        if v.status in FAULT_STATUSES:
            row["detail"] = v.detail
    for row, ep in zip(rows, batch.episodes or ()):  # an episode's whole conversation beside its transcript
        row.update(episode_sample(ep))
    return rows
