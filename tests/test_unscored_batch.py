"""training.batch.unscored_batch: sampled rows as a StepBatch with nothing scored (the teacher's held-out KL and the
engines test take their log-probs on one)."""

from __future__ import annotations

import torch

from rlvr.sampling.rollouts import Rollouts
from rlvr.tasks import Problem
from rlvr.training.batch import unscored_batch


def test_each_row_gets_its_groups_prompt_and_nothing_is_scored():
    ro = Rollouts(
        prompt_ids=[[1, 2], [3, 4, 5]],
        completion_ids=torch.tensor([[7, 8, 0], [9, 0, 0], [6, 6, 6]]),
        mask=torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0]]),
        sampler_logp=torch.full((3, 3), -1.5),
        group_ids=torch.tensor([0, 0, 1]),
        finish=["stop", "stop", "length"],
        texts=["a", "b", "c"],
    )
    problems = [Problem(id=str(i), prompt="q", answer="1") for i in range(3)]
    b = unscored_batch(ro, problems)
    assert b.prompt_ids == [[1, 2], [1, 2], [3, 4, 5]]
    assert b.lengths.tolist() == [2, 1, 3] and b.lengths.dtype == torch.long
    assert b.rewards.tolist() == [0.0, 0.0, 0.0] and b.verdicts == [] and b.terms == {}
    assert b.finish == ["stop", "stop", "length"] and b.texts == ["a", "b", "c"]
    assert [p.id for p in b.problems] == ["0", "1", "2"]
    assert torch.equal(b.mask, ro.mask) and torch.equal(b.sampler_logp, ro.sampler_logp)
