"""Any rlvr task as a multi-attempt episode: the policy answers, the task's reward grades it, and a wrong answer gets
its verdict back ("41 is wrong.") with another try, up to `attempts`. The episode's return is the graded reward of
its last answer times discount ** (attempt - 1): a right first answer is worth the most, and an answer is never
paid twice. Feedback names what the policy wrote, never the gold. A fault verdict (error, a bad gold:
rlvr.verifiers.base.FAULT_STATUSES) ends the episode at once and keeps its status, out of the loss as in a single-turn
step; an answer whose checking timed out is the policy's, a wrong attempt like any other.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlvr.environments.protocol import Step
from rlvr.environments.stepping import graded_together
from rlvr.verifiers.base import FAULT_STATUSES


@dataclass
class RetryStep(Step):
    verdict: object = None  # the graded answer's Verdict, on the step that ends the episode
    attempt: int = 0  # which attempt this answer was (1 = the first)


def feedback(verdict) -> str:
    """What a wrong attempt hears: its own answer judged, or how to write one; never the gold."""
    if verdict.status == "no_answer":
        return "No final answer was found. Write your final answer in \\boxed{} and try again."
    if verdict.status == "multiple_answers":
        return "Give exactly one final answer. Try again."
    if verdict.status == "timeout":
        return "Your answer could not be checked in time (too large to evaluate, or a program that did not finish). Try again."
    return f"{verdict.extracted} is wrong. Try again."


class RetryEnvironment:
    """One episode of `task` with up to `attempts` answers; `reward(texts, problems)` is the task's Reward."""

    tools: dict = {}

    def __init__(self, task, reward, attempts: int = 3, discount: float = 0.5):
        self.task, self.reward, self.attempts, self.discount = task, reward, attempts, discount
        self.problem, self.attempt = None, 0

    def reset(self, problem) -> list[dict]:
        self.problem, self.attempt = problem, 0
        return list(self.task.messages(problem))

    def step(self, turn: str) -> RetryStep:
        result = self.reward([turn], [self.problem])
        return self._answered(result.verdicts[0], float(result.total[0]))

    @staticmethod
    def step_batch(envs: list[RetryEnvironment], turns: list[str]) -> list[RetryStep]:
        """Every episode's step of a round, graded by one reward call per reward: the reward's worker pool starts
        once a round instead of once an answer. One by one, grading took 15.8 s of a 47 s retry step on the 2-core
        machine; a round of 64 answers took 5.4 s one by one on 8 threads and 0.19 s as one batch. The same Steps as
        `step` one by one; nothing changes before the grading returns, so a failed batch can be retaken one by one."""
        graded = graded_together(envs, turns, list(range(len(envs))))
        return [env._answered(*graded[i]) for i, env in enumerate(envs)]

    def _answered(self, verdict, total: float) -> RetryStep:
        """The step after an answer graded `verdict` with reward `total`: feedback and another try, or the end."""
        self.attempt += 1
        last = verdict.status == "correct" or verdict.status in FAULT_STATUSES or self.attempt >= self.attempts
        if not last:
            return RetryStep([{"role": "user", "content": feedback(verdict)}], attempt=self.attempt)
        paid = total * self.discount ** (self.attempt - 1)
        return RetryStep(done=True, reward_parts={"answer": paid}, verdict=verdict, attempt=self.attempt)


__all__ = ["RetryEnvironment", "RetryStep", "feedback"]
