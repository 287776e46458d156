"""The step's batch as one record: what the update (rlvr.policy.update) trains on and the metrics read.

It lives here, before `policy` in the package order, so that the update, which consumes it, can import and annotate
it; rlvr.training.batch builds it (sample, score, advantages), and `select_rows` / `concat` there reshape it.

Shapes: B rows (P groups x G samples, prompt-major), T completion positions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from rlvr.tasks.base import Problem
from rlvr.verifiers.base import Verdict

if TYPE_CHECKING:
    from rlvr.environments.episode import Episode


@dataclass
class StepBatch:
    problems: list[Problem]  # (B,) the problem of each row
    prompt_ids: list[list[int]]  # (B,) prompt token ids of each row
    completion_ids: torch.Tensor  # (B, T) long
    mask: torch.Tensor  # (B, T) float: sampled tokens that enter the loss
    sampler_logp: torch.Tensor  # (B, T) float32
    group_ids: torch.Tensor  # (B,) long
    lengths: torch.Tensor  # (B,) long: sampled tokens per row (whether or not it enters the loss)
    finish: list[str]  # (B,) "stop" | "length"
    texts: list[str]  # (B,)
    verdicts: list[Verdict]  # (B,) Verdict of the correctness term
    rewards: torch.Tensor  # (B,) float32: weighted reward terms (+ overlong penalty)
    terms: dict[str, list[float]]  # reward term name -> (B,) unweighted values
    # (B,) the group advantages; per token (B, T) where a teacher's term is added (rlvr.algorithms.distill)
    advantages: torch.Tensor | None = None
    stats: dict[str, float] = field(default_factory=dict)  # times, token and group counts
    # with dynamic sampling: every row generated this step (the kept rows are a subset), for the metrics;
    # and, under data parallel, the rounds one by one (rlvr.training.distributed.gather_batch merges them in order)
    generated: StepBatch | None = None
    rounds: list[StepBatch] | None = None
    episodes: list[Episode] | None = None  # (B,) the episode of each row, when rollouts are episodes
    # (B,) long: the policy version (updates applied) whose weights sampled each row; set when sampled ahead
    # (rollout.max_staleness >= 1, rlvr.training.ahead), None on the synchronous step (every row: the current one)
    versions: torch.Tensor | None = None

    @property
    def all_generated(self) -> StepBatch:
        """Every row generated this step: the metrics, samples and curriculum see these, the loss the kept ones."""
        return self.generated if self.generated is not None else self

    def __len__(self) -> int:
        return len(self.problems)

    def graded(self) -> torch.Tensor | None:
        """(B,) float32: each row's correctness score, the reward's first term (rlvr.verifiers.compose.Reward puts
        correctness first); None for a reward without terms (an environment's)."""
        return torch.tensor(next(iter(self.terms.values())), dtype=torch.float32) if self.terms else None
