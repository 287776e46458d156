"""What a task is: problems with checkable answers, how to prompt for them, and how to check them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SPLITS = ("train", "validation", "heldout")


@dataclass(frozen=True)
class Problem:
    """One checkable problem.

    `id` is stable across runs and machines (it is what splits are made by); `prompt` is the question as
    the user would ask it; `answer` is the gold final answer (math tasks) and `tests` the hidden tests
    (code tasks); `band` is the difficulty band's name.
    """

    id: str
    prompt: str
    answer: str | None = None
    tests: Any = None
    band: str = "all"
    meta: dict = field(default_factory=dict)


class DatasetError(ValueError):
    """A data row that cannot be used; the message names its source and row."""


def validate_problem(problem: Problem, source: str, index: int) -> Problem:
    """Reject a row with an empty prompt or no gold (neither answer nor tests), naming where it came from."""
    if not isinstance(problem.prompt, str) or not problem.prompt.strip():
        raise DatasetError(f"{source}: row {index} (id={problem.id!r}): empty prompt")
    if (problem.answer is None or str(problem.answer).strip() == "") and not problem.tests:
        raise DatasetError(f"{source}: row {index} (id={problem.id!r}): no answer and no tests")
    return problem


CODE_SYSTEM = "You write correct Python. Answer with the code in one ```python block."


class ProblemSetTask:
    """A task from ready-made problem lists per split, with a system prompt before each question.

    Used for loaded data sets (HumanEval, MATH-500, CHAMP, the procedural code task); a split the data
    set does not have is empty."""

    def __init__(self, name: str, splits: dict[str, list[Problem]], system_prompt: str, bands=None):
        self.name, self._splits, self.system_prompt = name, splits, system_prompt
        self.bands = list(bands or dict.fromkeys(p.band for ps in splits.values() for p in ps))

    def problems(self, split: str) -> list[Problem]:
        if split not in SPLITS:
            raise ValueError(f"split {split!r}: choose from {', '.join(SPLITS)}")
        return self._splits.get(split, [])

    def messages(self, problem: Problem) -> list[dict]:
        return [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": problem.prompt}]
