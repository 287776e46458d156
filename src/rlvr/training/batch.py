"""One training step's batch: sample G completions for each of P prompts, score them, turn rewards into
advantages. With dynamic sampling (DAPO) rounds repeat until the batch holds P informative groups.

Shapes: B rows (P groups x G samples, prompt-major), T completion positions. The record, `StepBatch`, is
rlvr.algorithms.step_batch's (there so that the update can import it); this module builds and reshapes it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from rlvr.algorithms.advantages import (
    ADVANTAGE_SCALES,
    OVERLONG_SHAPINGS,
    dynamic_sampling,
    group_advantages,
)
from rlvr.algorithms.presets import Algorithm
from rlvr.algorithms.step_batch import StepBatch
from rlvr.sampling import draw_settings
from rlvr.sampling.scored import RewardFn, sample_and_score
from rlvr.tasks.base import Problem
from rlvr.training.comm import Comm
from rlvr.verifiers.base import FAULT_STATUSES

if TYPE_CHECKING:
    from rlvr.config import RolloutConfig
    from rlvr.sampling.rollouts import Rollouts, Sampler

# one round's rows: (sampler, problems (P,), prompt_ids (P,), reward, algo, rollout, generator) -> StepBatch
RoundFn = Callable[
    ["Sampler", list[Problem], list[list[int]], RewardFn, Algorithm, "RolloutConfig", torch.Generator], StepBatch
]


def rollout_round(
    sampler: Sampler,
    problems: list[Problem],
    prompt_ids: list[list[int]],
    reward: RewardFn,
    algo: Algorithm,
    rollout: RolloutConfig,
    generator: torch.Generator,
) -> StepBatch:
    """Generate G completions for each problem and score them (rlvr.sampling.scored.sample_and_score, the path SFT
    data and validation take too); then fault rows out of the loss and overlong shaping (no advantages yet)."""
    scored = sample_and_score(
        sampler, problems, prompt_ids, rollout.group_size, reward, **draw_settings(rollout), generator=generator
    )
    ro, row_problems, result = scored.rollouts, scored.problems, scored.result
    lengths = ro.mask.sum(-1)
    keep = torch.tensor([v.status not in FAULT_STATUSES for v in result.verdicts], dtype=torch.float32)
    rewards, keep = overlong_shaping(
        algo, torch.tensor(result.total, dtype=torch.float32), keep, lengths, ro.finish, rollout.max_new_tokens
    )
    return StepBatch(
        problems=row_problems,
        prompt_ids=[ro.prompt_ids[g] for g in ro.group_ids.tolist()],
        completion_ids=ro.completion_ids,
        mask=ro.mask * keep[:, None],
        sampler_logp=ro.sampler_logp,
        group_ids=ro.group_ids.clone(),
        lengths=lengths.long(),
        finish=list(ro.finish),
        texts=list(ro.texts),
        verdicts=list(result.verdicts),
        rewards=rewards,
        terms={k: list(v) for k, v in result.terms.items()},
        stats={
            "time/generate": scored.generate_s,
            "time/verify": scored.verify_s,
            "gen_tokens": int(ro.mask.sum().item()),
        },
    )


def unscored_batch(rollouts: Rollouts, problems: list[Problem]) -> StepBatch:
    """A StepBatch of sampled rows as they came, nothing scored (no verdicts, rewards 0, no terms): what a
    teacher's log-probs are taken on outside training. `problems` one per row."""
    ro = rollouts
    return StepBatch(
        problems=list(problems),
        prompt_ids=[ro.prompt_ids[g] for g in ro.group_ids.tolist()],
        completion_ids=ro.completion_ids,
        mask=ro.mask,
        sampler_logp=ro.sampler_logp,
        group_ids=ro.group_ids,
        lengths=ro.mask.sum(-1).long(),
        finish=list(ro.finish),
        texts=list(ro.texts),
        verdicts=[],
        rewards=torch.zeros(len(ro.group_ids)),
        terms={},
    )


def overlong_shaping(
    algo: Algorithm, rewards: torch.Tensor, keep: torch.Tensor, lengths: torch.Tensor, finish: list[str], limit: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """DAPO's overlong shaping of (B,) rewards and (B,) keep weights, for rows of (B,) `lengths` out of `limit`
    (a single-turn row: its tokens of max_new_tokens; an episode: its ids of episode.max_total_tokens):
    "soft" adds a linear penalty inside the last `buffer` tokens before the limit, "filter" keeps a truncated row
    (finish "length") out of the loss, neither rewarded nor punished. Returns (rewards, keep)."""
    return OVERLONG_SHAPINGS.get(algo.overlong)(rewards, keep, lengths, finish, limit, algo.overlong_buffer(limit))


def select_rows(batch: StepBatch, rows: list[int]) -> StepBatch:
    idx = torch.tensor(rows, dtype=torch.long)
    t = max(int(batch.lengths[idx].max().item()) if rows else 1, 1)
    return StepBatch(
        problems=[batch.problems[i] for i in rows],
        prompt_ids=[batch.prompt_ids[i] for i in rows],
        completion_ids=batch.completion_ids[idx, :t],
        mask=batch.mask[idx, :t],
        sampler_logp=batch.sampler_logp[idx, :t],
        group_ids=batch.group_ids[idx],
        lengths=batch.lengths[idx],
        finish=[batch.finish[i] for i in rows],
        texts=[batch.texts[i] for i in rows],
        verdicts=[batch.verdicts[i] for i in rows],
        rewards=batch.rewards[idx],
        terms={k: [v[i] for i in rows] for k, v in batch.terms.items()},
        stats=dict(batch.stats),
        episodes=[batch.episodes[i] for i in rows] if batch.episodes is not None else None,
        versions=batch.versions[idx] if batch.versions is not None else None,
    )


def concat(batches: list[StepBatch], pad_id: int) -> StepBatch:
    """Stack batches from several rounds: re-pad to the longest T and renumber groups so none collide."""
    t = max(b.completion_ids.shape[1] for b in batches)

    def pad(x: torch.Tensor, value: float) -> torch.Tensor:
        return torch.nn.functional.pad(x, (0, t - x.shape[1]), value=value)

    offset, gids = 0, []
    for b in batches:
        _, inverse = torch.unique(b.group_ids, return_inverse=True)
        gids.append(inverse + offset)
        offset += int(inverse.max().item()) + 1 if len(b) else 0
    episodes = [b.episodes for b in batches if b.episodes is not None]
    versions = [b.versions for b in batches if b.versions is not None]
    stats: dict[str, float] = {}
    for b in batches:
        for k, v in b.stats.items():
            stats[k] = stats.get(k, 0) + v
    return StepBatch(
        problems=sum((b.problems for b in batches), []),
        prompt_ids=sum((b.prompt_ids for b in batches), []),
        completion_ids=torch.cat([pad(b.completion_ids, pad_id) for b in batches]),
        mask=torch.cat([pad(b.mask, 0.0) for b in batches]),
        sampler_logp=torch.cat([pad(b.sampler_logp, 0.0) for b in batches]),
        group_ids=torch.cat(gids),
        lengths=torch.cat([b.lengths for b in batches]),
        finish=sum((b.finish for b in batches), []),
        texts=sum((b.texts for b in batches), []),
        verdicts=sum((b.verdicts for b in batches), []),
        rewards=torch.cat([b.rewards for b in batches]),
        terms={k: sum((b.terms.get(k, [0.0] * len(b)) for b in batches), []) for k in _term_names(batches)},
        stats=stats,
        episodes=sum(episodes, []) if len(episodes) == len(batches) else None,  # every batch's, or none
        versions=torch.cat(versions) if len(versions) == len(batches) else None,
    )


def _term_names(batches: list[StepBatch]) -> list[str]:
    """Every reward term of any batch, in first-seen order (an episode round may lack a part another earned)."""
    return list(dict.fromkeys(k for b in batches for k in b.terms))


def collect(
    sampler: Sampler,
    next_prompts: Callable[[], tuple[list[Problem], list[list[int]]]],
    reward: RewardFn,
    algo: Algorithm,
    rollout: RolloutConfig,
    generator: torch.Generator,
    pad_id: int,
    comm: Comm | None = None,
    round_fn: RoundFn = rollout_round,
) -> StepBatch:
    """The step's batch (on this rank: its block of it). next_prompts() -> (problems (P,), prompt_ids (P,)) draws
    the next prompts; with `comm` (rlvr.training.comm.Comm) every rank makes the same call and keeps its
    contiguous block, so a group never straddles ranks.

    Without dynamic sampling: one round, every group kept. With it: rounds until P informative (nonzero
    variance) groups are kept or `algo.max_sampling_rounds` rounds ran; the kept groups are those one process
    would keep (advantages.dynamic_sampling decides, the ranks exchanging their counts). `round_fn` makes one
    round's rows (rollout_round: one completion each; rlvr.training.episodes.EpisodeRound: one episode each).
    """
    comm, want = comm or Comm(), rollout.prompts_per_step  # one process: a Comm of one rank, every call a no-op
    if want < comm.world:
        raise ValueError(f"rollout.prompts_per_step={want} is less than the {comm.world} ranks: a rank would idle")
    local = dataclasses.replace(rollout, prompts_per_step=len(comm.shard(range(want))))

    def draw() -> StepBatch:
        problems, ids = next_prompts()
        return round_fn(sampler, comm.shard(problems), comm.shard(ids), reward, algo, local, generator)

    if not algo.dynamic_sampling:
        batch = draw()
        batch.stats.update(
            {
                "dynamic_sampling/generated_groups": local.prompts_per_step,
                "dynamic_sampling/kept_groups": local.prompts_per_step,
            }
        )
    else:
        batch = _refill(draw, want, algo.max_sampling_rounds, pad_id, comm)
    batch.advantages = _advantages(batch, algo, comm)
    return batch


def _refill(draw: Callable[[], StepBatch], want: int, max_rounds: int, pad_id: int, comm: Comm) -> StepBatch:
    """DAPO's dynamic sampling over rollout rounds: the kept rows of each round, with every generated row beside."""
    rounds: list[StepBatch] = []

    def next_round(_round: int) -> tuple[torch.Tensor, torch.Tensor]:
        rounds.append(draw())
        return rounds[-1].rewards, rounds[-1].group_ids

    def exchange(found: int) -> tuple[int, int]:  # earlier ranks' informative groups, and all ranks'
        counts = comm.all_gather(found)
        return sum(counts[: comm.rank]), sum(counts)

    kept, ds_stats = dynamic_sampling(
        next_round, want_groups=want, max_rounds=max_rounds, exchange=exchange if comm.world > 1 else None
    )
    parts = [select_rows(rounds[r], rows.tolist()) for r, rows in kept if len(rows)]
    batch = concat(parts, pad_id) if parts else select_rows(rounds[-1], [])
    # Time and reward metrics of the step cover every generated row, not only the kept ones.
    batch.stats.update({k: sum(r.stats[k] for r in rounds) for k in ("time/generate", "time/verify", "gen_tokens")})
    batch.stats.update(ds_stats)
    batch.generated = concat(rounds, pad_id)
    if comm.world > 1:
        batch.rounds = rounds
    return batch


def _advantages(batch: StepBatch, algo: Algorithm, comm: Comm) -> torch.Tensor:
    """Group advantages (a group lives on one rank); a scale that reads the whole batch's rewards (its entry says:
    "batch", a plug-in) gets the global batch's, gathered in rank order so the float sums run as in one process."""
    batch_rewards = None
    if comm.world > 1 and ADVANTAGE_SCALES.get(algo.adv_scale).reads_batch:  # a collective: every rank, rows or none
        batch_rewards = torch.cat(
            [torch.as_tensor(r, dtype=torch.float32) for r in comm.all_gather(batch.rewards.tolist())]
        )
    if not len(batch):
        return torch.zeros(0)
    return group_advantages(
        batch.rewards, batch.group_ids, scale=algo.adv_scale, eps=algo.adv_eps, batch_rewards=batch_rewards
    )
