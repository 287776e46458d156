"""One rule for verdicts that say nothing about the completion (rlvr.verifiers.base.FAULT_STATUSES: an unusable
gold, a grader error), and for `timeout`, which is a verdict on the completion (its program or answer ran past its
limit) and grades as a wrong answer. Checked in every consumer: rlvr's own single-turn step and the reward's
shaping rule here; episodes, TRL, verl, OpenRLHF and the service beside their other tests."""

import itertools

import pytest
import torch

from conftest import make_tiny_llama
from rlvr.algorithms.presets import get_preset
from rlvr.config import Config
from rlvr.sampling import build_sampler
from rlvr.training.batch import rollout_round
from rlvr.verifiers.base import FAULT_STATUSES, STATUSES, Verdict
from rlvr.verifiers.compose import Reward, Term
from rlvr.verifiers.registry import build_verifier

CYCLE = ("timeout", "error", "invalid_gold", "correct")


class Scripted:
    """Hands out the statuses of CYCLE in call order (the in-process scorer calls it row by row, in order)."""

    name = "scripted"

    def __init__(self):
        self.order = itertools.cycle(CYCLE)

    def score(self, completion, problem) -> Verdict:
        status = next(self.order)
        return Verdict(status, float(status == "correct"), "x", "")


def test_fault_statuses_are_the_grader_and_the_gold_not_the_completion():
    assert FAULT_STATUSES == ("invalid_gold", "error")
    assert set(FAULT_STATUSES) < set(STATUSES) and "timeout" in STATUSES


def test_reward_pays_a_timeout_as_wrong_and_a_fault_nothing():
    """Shaping terms follow the correctness term's rule: a fault row earns no format bonus, a timed-out row earns what
    a wrong row does."""
    terms = [
        Term("correct", "exact", 1.0, Scripted(), workers=0, timeout_s=5.0),
        Term("format", "boxed_format", 0.1, build_verifier("boxed_format"), workers=0, timeout_s=5.0),
    ]
    result = Reward(terms)([r"\boxed{1}"] * 4, [None] * 4)
    assert [v.status for v in result.verdicts] == list(CYCLE)
    assert result.terms["format"] == [1.0, 0.0, 0.0, 1.0]
    assert result.total == pytest.approx([0.1, 0.0, 0.0, 1.1])


def test_single_turn_step_trains_timeouts_at_zero_and_leaves_faults_out(tokenizer):
    """rollout_round on a real sampler: rows 0 and 4 (timeout) keep their sampled tokens in the loss at reward 0;
    error and invalid_gold rows are masked out whole."""
    from rlvr.tasks.base import Problem

    cfg = Config.from_dict({})
    rollout = cfg.rollout.__class__(**{**vars(cfg.rollout), "group_size": 4, "max_new_tokens": 6, "dtype": "float32"})
    model = make_tiny_llama(len(tokenizer))
    sampler = build_sampler(rollout, model, tokenizer, backend="hf")
    terms = [Term("correct", "exact", 1.0, Scripted(), workers=0, timeout_s=5.0)]
    problems = [Problem(id=str(i), prompt="q", answer="1") for i in range(2)]
    prompt_ids = [tokenizer("What is 1 + 0?")["input_ids"]] * 2
    batch = rollout_round(
        sampler, problems, prompt_ids, Reward(terms), get_preset("grpo"), rollout, torch.Generator().manual_seed(0)
    )
    statuses = [v.status for v in batch.verdicts]
    assert statuses == list(CYCLE) * 2
    in_loss = (batch.mask.sum(-1) > 0).tolist()
    assert in_loss == [s not in FAULT_STATUSES for s in statuses] == [True, False, False, True] * 2
    assert batch.mask[0].sum() == batch.lengths[0]  # the timed-out row trains on every token it sampled
    assert batch.rewards.tolist() == [0.0, 0.0, 0.0, 1.0] * 2


def test_retry_gives_a_timed_out_answer_another_attempt_and_ends_on_a_fault():
    from rlvr.environments.retry import RetryEnvironment, feedback

    env = RetryEnvironment(task=None, reward=None, attempts=3)
    step = env._answered(Verdict("timeout", 0.0, None, "refused"), 0.0)
    assert not step.done and "could not be checked in time" in step.messages[0]["content"]
    assert "None" not in feedback(Verdict("timeout", 0.0, None))  # no answer text to quote
    step = env._answered(Verdict("error", 0.0, None, "grader bug"), 0.0)
    assert step.done and step.verdict.status == "error" and step.attempt == 2
