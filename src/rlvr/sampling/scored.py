"""Sample, then score: the one path from problems to graded rows that training, the SFT baseline's rejection sampling,
evaluation and validation share, and the one seed formula of a run's sampling draws.

    sample_and_score(sampler, problems (P,), prompt_ids (P,), n, reward, **draw) -> Scored
        one sampler.generate(prompt_ids, n, **draw), then one reward call over its B = P * n rows, prompt-major:
        problem i's rows are i*n .. i*n + n - 1, each row's problem, verdict and reward at its row.
    score_rows(reward, texts (B,), problems (B,)) -> RewardResult   the scoring half alone, its length checked
    draw_seed(seed, index) -> int                                    the seed of a run's draw number `index`

It lives in rlvr.sampling, after verifiers (whose RewardResult it returns) and before evaluation and training (which
both call it), so that neither recipe keeps its own copy. Each caller keeps its own policy over the scored rows:
training its fault mask, overlong shaping and advantages (rlvr.training.batch), the SFT baseline its keep-correct
filter (rlvr.training.sft_data), validation its per-band accuracy (rlvr.evaluation.validation). Evaluation
(rlvr.evaluation.driver) samples through a texts-only `policy_generate` callable that external samplers implement, so
it has no Rollouts to pass here: it shares score_rows, the scoring half.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from rlvr.sampling.rollouts import Rollouts, Sampler
from rlvr.tasks.base import Problem

if TYPE_CHECKING:
    from rlvr.verifiers.compose import RewardResult

# what scores rows: (completions (B,), problems (B,)) -> RewardResult (a Reward, or a control run's)
RewardFn = Callable[[list[str], list[Problem]], "RewardResult"]

# A prime stride between runs' seeds: seeds s and s + 1 never share a draw while the indices stay below it (a run's
# steps and rounds do; a rank's offset, rlvr.training.comm, is 2**40, far from both).
_SEED_STRIDE = 1_000_003


def draw_seed(seed: int, index: int) -> int:
    """The torch.Generator seed of a run's draw `index`: the RL step's batch (index = step, plus a rank's offset
    under data parallel) and the SFT baseline's sampling round (index = round, from 1) both take it from here."""
    return seed * _SEED_STRIDE + index


def draw_generator(seed: int, index: int) -> torch.Generator:
    """A CPU generator seeded with draw_seed(seed, index)."""
    return torch.Generator().manual_seed(draw_seed(seed, index))


@dataclass
class Scored:
    """B sampled rows and their grades, aligned by row: rollouts.texts[i] was graded against problems[i] into
    result.verdicts[i], result.total[i] and each result.terms[name][i]."""

    rollouts: Rollouts
    problems: list[Problem]  # (B,) each row's problem: problems[rollouts.group_ids[i]] of the ones sampled
    result: RewardResult
    generate_s: float  # wall time of the sampler call, seconds
    verify_s: float  # wall time of the reward call, seconds


def score_rows(reward: RewardFn, texts: list[str], problems: list[Problem]) -> RewardResult:
    """One reward call over B completions and their B problems; a reward that returns another count of verdicts
    or totals is a ValueError here, not a misaligned batch later."""
    result = reward(texts, problems)
    if len(result.verdicts) != len(texts) or len(result.total) != len(texts):
        raise ValueError(f"reward returned {len(result.verdicts)} verdicts for {len(texts)} completions")
    return result


def sample_and_score(
    sampler: Sampler,
    problems: list[Problem],
    prompt_ids: list[list[int]],
    n: int,
    reward: RewardFn,
    **draw: Any,
) -> Scored:
    """n completions for each of P prompts (prompt_ids[i] encodes problems[i]), every one scored in one reward call.
    `draw` goes to sampler.generate as given (max_new_tokens, temperature, top_p, top_k, generator): the caller
    decides how it samples, this function only that every row is graded against its own problem."""
    t0 = time.perf_counter()
    ro = sampler.generate(prompt_ids, n, **draw)
    t1 = time.perf_counter()
    owners = [problems[g] for g in ro.group_ids.tolist()]
    result = score_rows(reward, ro.texts, owners)
    return Scored(ro, owners, result, t1 - t0, time.perf_counter() - t1)


__all__ = ["RewardFn", "Scored", "draw_generator", "draw_seed", "sample_and_score", "score_rows"]
