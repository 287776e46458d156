"""What a task is: problems with checkable answers, how to prompt for them, and how to check them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rlvr.tasks.answer_formats import ANSWER_FORMATS

SPLITS = ("train", "validation", "heldout")
# The one gold-column rule, shared by `rlvr verify`, the jsonl task and the integrations (TRL, verl, OpenRLHF):
# a row's gold answer is in the first of these columns that the row has (with a value that is not null).
GOLD_COLUMNS = ("answer", "gold", "solution", "ground_truth", "final_answer")
# The question, as the data sets people hold name it: TRL's and ours `prompt`, MATH's `problem`, GSM8K's and
# DeepMath's `question` (the first present wins; a task setting names another).
PROMPT_COLUMNS = ("prompt", "problem", "question")
# A difficulty band, likewise: ours `band`, DeepMath's `difficulty` (1..10), MATH's `level`.
BAND_COLUMNS = ("band", "difficulty", "level")

# GSM8K writes a gold as its worked solution, then "#### " and the final answer; the work carries calculator notes
# ("48/2 = <<48/2=24>>24") that are the data set's tooling, not a solution a model should imitate.
_WORKED_GOLD = re.compile(r"^(?P<work>.*?)\s*####\s*(?P<answer>[^\n#]+?)\s*$", re.S)
_CALCULATOR_NOTE = re.compile(r"<<[^<>\n]*>>")


def worked_gold(gold) -> tuple[str, str | None]:
    """(the final answer, the worked solution before it or None) of a gold as a data row gives it. GSM8K's
    `WORK\n#### 72` is the gold 72 with WORK as its reasoning (calculator notes dropped); any other gold is itself,
    without work. The one rule every reader of golds applies (data files, `rlvr verify`, the service, TRL's columns)."""
    text = str(gold)
    m = _WORKED_GOLD.match(text)
    if m is None:
        return text, None
    work = _CALCULATOR_NOTE.sub("", m.group("work")).strip()
    return m.group("answer"), work or None


def final_gold(gold):
    """The final answer of a gold (worked_gold's first part); None stays None, and so does anything not text."""
    return worked_gold(gold)[0] if isinstance(gold, str) else gold


def band_of(value) -> str:
    """A band's name from a row's difficulty: text as it is, a number (DeepMath's 1..10) in bands of width 2."""
    if value is None:
        return "all"
    if isinstance(value, str) and not value.strip().replace(".", "", 1).isdigit():
        return value
    try:
        low = int(float(value) // 2 * 2)
    except (TypeError, ValueError):
        return str(value)
    return f"difficulty {low}-{low + 2}"


def gold_column(row) -> str | None:
    """The column holding `row`'s gold answer under the gold-column rule (GOLD_COLUMNS, first present wins), or
    None. `row` is a mapping: a data row (a null value does not count as present) or a batch of columns."""
    return next((k for k in GOLD_COLUMNS if k in row and row[k] is not None), None)


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


def own_messages(problem: Problem) -> list[dict] | None:
    """The chat messages the data gave as a problem's prompt (rlvr.tasks.chat), or None for a text question."""
    return (problem.meta.get("messages") if isinstance(problem.meta, dict) else None) or None


def task_messages(system_prompt: str | None, problem: Problem, shots: Sequence[dict] = ()) -> list[dict]:
    """The chat for a problem: its own messages when the data gave a chat prompt (the task's system prompt added
    only when they have no system turn; no demonstration, the data's own turns are kept as written), else the system
    prompt, the demonstration's turns (`shots`, rlvr.tasks.demo) and the question."""
    own = own_messages(problem)
    if own:
        lead = (
            []
            if any(m["role"] == "system" for m in own) or not system_prompt
            else [{"role": "system", "content": system_prompt}]
        )
        return lead + [dict(m) for m in own]
    lead = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return lead + [dict(m) for m in shots] + [{"role": "user", "content": problem.prompt}]


def validate_problem(problem: Problem, source: str, index: int) -> Problem:
    """Reject a row with an empty prompt or no gold (neither answer nor tests), naming where it came from."""
    if not isinstance(problem.prompt, str) or not problem.prompt.strip():
        raise DatasetError(f"{source}: row {index} (id={problem.id!r}): empty prompt")
    if (problem.answer is None or str(problem.answer).strip() == "") and not problem.tests:
        raise DatasetError(
            f"{source}: row {index} (id={problem.id!r}): no gold answer (give one of the columns "
            f"{', '.join(GOLD_COLUMNS)}) and no tests"
        )
    return problem


# The system prompt of data of one's own (jsonl, hub): the reference write-up's. A model that reasons keeps its chain
# of thought, and the answer still lands where the verifier looks. (The embedded default's arithmetic task keeps
# its one-line prompt and solved exchange: a 135M model that does not reason, docs/results.md.)
REASONING_SYSTEM = "Solve the problem step by step. Put your final answer inside \\boxed{}."

CODE_SYSTEM = "You write correct Python. Answer with the code in one ```python block."


def check_answer_format(answer_format: str) -> str:
    """`answer_format` if it names an answer format (rlvr.tasks.answer_formats); a ConfigError naming the setting."""
    return ANSWER_FORMATS.check(answer_format, "task.settings.answer_format")


def system_prompt_for(answer_format: str, given: str | None, default: str) -> str:
    """A task's system prompt: the one given, else the answer format's own instruction, else the task's default."""
    return given or ANSWER_FORMATS.get(answer_format).system_prompt or default


def math_grader(answer_form: str = "math") -> list[dict]:
    """The reward terms that grade final answers: math-verify in the task's answer form, plus the boxed-format
    shaping term at a tenth of its weight."""
    return [
        {"name": "correct", "kind": "math", "weight": 1.0, "answer_form": answer_form},
        {"name": "format", "kind": "boxed_format", "weight": 0.1},
    ]


CODE_GRADER = [{"name": "correct", "kind": "python_tests", "weight": 1.0}]


def default_grader(problems, answer_form: str = "math") -> list[dict]:
    """The grader problems need: hidden tests and no answers -> the code verifier; otherwise math answers."""
    first = next(iter(problems), None)
    if first is not None and first.answer is None and first.tests:
        return [dict(t) for t in CODE_GRADER]
    return math_grader(answer_form)


class Task(Protocol):
    """What every task is to the rest of rlvr (a built-in, or the object a plug-in's factory returns): its name, the
    problems of a split (one of SPLITS) and the chat that asks one problem. Tasks also carry `bands` and, most of
    them, grading settings (`grader`, `answer_form`, `answer_format`) that their readers look up with getattr."""

    name: str

    def problems(self, split: str) -> list[Problem]: ...

    def messages(self, problem: Problem) -> list[dict[str, Any]]: ...


def use_demo(task, arm: str) -> None:
    """Set a task to one arm of its demo_options (rlvr.tasks.demo): its turns, and the train split its recorded
    setting gives when the task is built again from it (a resume, an evaluation): with the demonstration its question
    stays out of training, with none the whole train split (`task._train_all`, kept before the question left) trains."""
    turns, _ = task.demo_options[arm]
    task.demo = list(turns)
    if not turns and getattr(task, "_train_all", None) is not None:
        task._splits = {**task._splits, "train": list(task._train_all)}
    task.demo_options = {}


class SplitTask:
    """What every task with problem lists per split shares: `problems(split)` from `self._splits` (a split it does
    not have is empty; a name that is no split is a ValueError naming the splits)."""

    _splits: dict[str, list[Problem]]

    def problems(self, split: str) -> list[Problem]:
        if split not in SPLITS:
            raise ValueError(f"split {split!r}: choose from {', '.join(SPLITS)}")
        return self._splits.get(split, [])


class ProblemSetTask(SplitTask):
    """A task from ready-made problem lists per split, with a system prompt before each question.

    Used for loaded data sets (HumanEval, MATH-500, CHAMP, the procedural code task); a split the data
    set does not have is empty. `grader`: the reward terms that grade it (default: what its problems need);
    `answer_form`: what an answer must look like (rlvr.tasks.forms); `demo`: the demonstration's turns before each
    question (rlvr.tasks.demo.resolve_demo makes them, and the splits without its question, from the setting)."""

    def __init__(
        self,
        name: str,
        splits: dict[str, list[Problem]],
        system_prompt: str,
        bands=None,
        grader: list[dict] | None = None,
        answer_form: str = "math",
        demo: Sequence[dict] = (),
        answer_format: str = "boxed",
    ):
        self.name, self._splits, self.system_prompt = name, splits, system_prompt
        self.bands = list(bands or dict.fromkeys(p.band for ps in splits.values() for p in ps))
        self.answer_form = answer_form
        self.grader = grader or default_grader((p for ps in splits.values() for p in ps), answer_form)
        self.answer_format = answer_format
        self.demo = list(demo)
        self.demo_options: dict = {}  # demo "auto": what rlvr.evaluation.demo_choice measures (rlvr.tasks.demo)
        self._train_all: list[Problem] | None = None  # the train split before a demonstration's question left it

    def messages(self, problem: Problem) -> list[dict]:
        return task_messages(self.system_prompt, problem, self.demo)
