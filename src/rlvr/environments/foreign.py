"""What the adapters of other projects' environments (TRL classes, `verifiers`, OpenEnv) share: a problem as the
dataset row its owner expects, the verdict of a reward its owner computed, and the `episode.grader` rule that
decides who grades the final answer: the environment's owner ("environment"), rlvr's verifier for the task
("task"), or both as separate reward parts ("both", the verdict from rlvr's).

An owner's reward is a number, not a verdict: rlvr reports it as `correct` where it is at least 1 (the reward a
solved episode earns in the environments we know), `wrong` below, and `error` where the owner returned None or a
value that is not a number (TRL's "not applicable"), which keeps the episode out of the loss.
"""

from __future__ import annotations

import json
import math

from rlvr.errors import ConfigError
from rlvr.verifiers.base import Verdict

GRADERS = ("environment", "task", "both")


class EnvironmentFault(RuntimeError):
    """An environment broke its own contract during an episode (the episode becomes `error`, the run goes on)."""


def problem_columns(problem, messages: list[dict]) -> dict:
    """A problem as a dataset row: `prompt` (the task's chat messages), `question`, the gold as `answer`, `id`,
    `band`, `tests` where the task has them, and the task's own columns (meta) that are plain data."""
    row = {"prompt": messages, "question": problem.prompt, "answer": problem.answer, "id": problem.id}
    row["band"] = problem.band
    if problem.tests is not None:
        row["tests"] = problem.tests
    for key, value in (problem.meta or {}).items():
        if key not in row and _plain(value):
            row[key] = value
    return row


def _plain(value) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def owner_verdict(value, who: str, solved_at: float = 1.0) -> tuple[float, Verdict]:
    """(reward, verdict) of a reward the environment's owner computed; `correct` from `solved_at` up."""
    try:
        reward = float(value)
    except (TypeError, ValueError):
        reward = math.nan
    if math.isnan(reward):
        return 0.0, Verdict("error", 0.0, None, f"{who} returned {value!r}, not a reward")
    return reward, Verdict("correct" if reward >= solved_at else "wrong", reward, None, f"{who}: {reward:g}")


def final_grade(grader: str, owner: dict, task_reward, turn: str, problem) -> tuple[dict, Verdict]:
    """(reward parts, verdict) of an episode's final answer. `owner`: {part name: the owner's reward} (may be
    empty); `task_reward`: the task's rlvr Reward, graded on the final turn's text where `grader` asks for it."""
    parts, verdict = {}, None
    if grader in ("environment", "both"):
        for name, value in owner.items():
            reward, v = owner_verdict(value, name)
            parts[name] = reward
            verdict = v if verdict is None or v.status == "error" else verdict
    if grader in ("task", "both"):
        result = task_reward([turn], [problem])
        parts["answer"] = float(result.total[0])
        verdict = result.verdicts[0] if verdict is None or verdict.status != "error" else verdict
    if verdict is None:
        raise ConfigError("episode.grader=environment, but the environment has no reward of its own")
    return parts, verdict


__all__ = ["GRADERS", "EnvironmentFault", "problem_columns", "owner_verdict", "final_grade"]
