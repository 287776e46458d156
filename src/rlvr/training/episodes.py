"""A step's rollouts as episodes (rlvr.environments): G episodes per problem, each a fresh environment, run by
rlvr.environments.episode.run_episodes; the batch is the same StepBatch a single-turn step makes, so advantages, the
loss and the update need nothing new. Row b's completion is exactly the ids its episode's turns sampled with the
environment's ids spliced in; `mask` is 1 on the policy's ids and 0 on the environment's; the reward is the
episode's return (its reward parts summed, each part a reward term in the metrics).

An episode the environment broke or hung (episode status "error" / "timeout": verdict "error"), or whose graded answer
is a fault verdict (rlvr.verifiers.base.FAULT_STATUSES), is kept out of the loss, as a single-turn fault row is; a
graded answer that timed out is the policy's and trains as a wrong one. An episode that ends without a graded answer (a turn or token limit) has the verdict
no_answer and earns the reward parts it gathered. DAPO's overlong shaping (algorithm.overlong) reads an episode's
ids out of episode.max_total_tokens (shape_overlong).
"""

from __future__ import annotations

import time

import torch

from rlvr.environments.episode import episode_limits, run_episodes
from rlvr.environments.figures import episode_verdict, transcript
from rlvr.environments.openings import EpisodeOpenings
from rlvr.sampling import draw_settings
from rlvr.training.batch import StepBatch, overlong_shaping
from rlvr.verifiers.base import FAULT_STATUSES


class EpisodeRound:
    """Drop-in for rlvr.training.batch.rollout_round: the same arguments, one episode per row."""

    def __init__(self, new_environment, tokenizer, episode):
        self.new_environment, self.tokenizer, self.episode = new_environment, tokenizer, episode

    def __call__(self, sampler, problems, prompt_ids, reward, algo, rollout, generator) -> StepBatch:
        del prompt_ids, reward  # each episode encodes its own opening (tools shown) and its environment grades it
        t0 = time.perf_counter()
        rows = [p for p in problems for _ in range(rollout.group_size)]  # prompt-major, as the sampler's groups
        episodes = run_episodes(
            sampler,
            self.tokenizer,
            [self.new_environment() for _ in rows],
            rows,
            **episode_limits(self.episode),
            **draw_settings(rollout),
            generator=generator,
        )
        batch = shape_overlong(
            episode_batch(episodes, self.tokenizer.pad_token_id, rollout.group_size), algo, self.episode
        )
        # the environments' wall time (their steps run side by side), so generate + verify is the round's time
        env_s = episodes.env_wall_s
        batch.stats.update({"time/generate": time.perf_counter() - t0 - env_s, "time/verify": env_s})
        return batch


def shape_overlong(batch: StepBatch, algo, episode) -> StepBatch:
    """algorithm.overlong on episodes: the length is the episode's ids (the policy's and the environment's) out of
    episode.max_total_tokens, and an episode is truncated when that limit ended it."""
    if batch.episodes is None:
        raise ValueError("shape_overlong: the batch holds no episodes")
    truncated = ["length" if ep.ended_by == "tokens" else "stop" for ep in batch.episodes]
    ones = torch.ones(len(truncated))
    batch.rewards, keep = overlong_shaping(
        algo, batch.rewards, ones, batch.lengths, truncated, episode.max_total_tokens
    )
    batch.mask = batch.mask * keep[:, None]
    return batch


def episode_batch(episodes: list, pad_id: int, group_size: int) -> StepBatch:
    """(B,) episodes, prompt-major in groups of group_size -> a StepBatch (T = the longest episode's ids)."""
    t = max([len(ep.ids) for ep in episodes] + [1])
    b = len(episodes)
    ids, mask, logp = torch.full((b, t), pad_id, dtype=torch.long), torch.zeros(b, t), torch.zeros(b, t)
    verdicts = [episode_verdict(ep) for ep in episodes]
    for row, ep in enumerate(episodes):
        n = len(ep.ids)
        ids[row, :n] = torch.tensor(ep.ids, dtype=torch.long)
        keep = ep.status == "ok" and verdicts[row].status not in FAULT_STATUSES
        mask[row, :n] = torch.tensor(ep.mask) * float(keep)
        logp[row, :n] = torch.tensor(ep.sampler_logp)
    names = sorted({k for ep in episodes for k in ep.reward_parts})
    return StepBatch(
        problems=[ep.problem for ep in episodes],
        prompt_ids=[ep.prompt_ids for ep in episodes],
        completion_ids=ids,
        mask=mask,
        sampler_logp=logp,
        group_ids=torch.arange(b) // group_size,
        lengths=torch.tensor([len(ep.ids) for ep in episodes], dtype=torch.long),
        finish=["stop" if ep.ended_by == "done" else "length" for ep in episodes],
        texts=[transcript(ep) for ep in episodes],
        verdicts=verdicts,
        rewards=torch.tensor([ep.reward for ep in episodes], dtype=torch.float32),
        terms={k: [ep.reward_parts.get(k, 0.0) for ep in episodes] for k in names},
        stats={"gen_tokens": sum(ep.policy_tokens for ep in episodes)},
        episodes=list(episodes),
    )


def recorded_prompts(task, tokenizer, rollout_round):
    """The task as final/ records its prompts (rlvr.rundir.final): an episode run's openings, tools shown, where
    the round runs episodes; the task itself otherwise."""
    if isinstance(rollout_round, EpisodeRound):
        return EpisodeOpenings(task, tokenizer, rollout_round.new_environment)
    return task


__all__ = ["EpisodeRound", "episode_batch", "shape_overlong", "recorded_prompts"]
