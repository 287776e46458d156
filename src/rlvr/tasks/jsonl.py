"""A task read from a local JSON-lines file: one problem per line, optional `id` and `band`.

- `prompt` (or `problem`): the question as text, or as chat messages (a list of {"role", "content"}, the
  conversational form TRL and hub datasets use): the messages are kept whole, system turn and few-shot turns
  included, and the task's system prompt is added only when they have no system turn.
- the gold answer: the first of `answer`, `gold`, `solution`, `ground_truth` the row has (the gold-column rule,
  rlvr.tasks.base.GOLD_COLUMNS, shared with `rlvr verify` and the integrations); or hidden `tests` (code).
- `answer_form` (task setting): "auto" (default: "number" when every gold is a numeral, else "math"), "math" or
  "number" (rlvr.tasks.forms): what an answer must look like before it is compared.
- `answer_format` (task setting): "boxed" (default) or "tags" (<think> then <answer>, the R1 format): how the
  default system prompt asks for the answer, and how the reward reads it.
A bad row fails the load with its file and line, before anything is written."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rlvr.tasks.base import (
    SPLITS,
    TAGS_SYSTEM,
    DatasetError,
    Problem,
    chat_prompt,
    check_answer_format,
    default_grader,
    gold_column,
    task_messages,
    validate_problem,
)


def row_problem(row: dict, where: str, line_no: int) -> Problem:
    """One validated Problem from one data row (see the module doc)."""
    text, messages = chat_prompt(row.get("prompt", row.get("problem", "")), where)
    gold_key = gold_column(row)
    answer = None if gold_key is None else row[gold_key]
    pid = str(row.get("id") or "row-" + hashlib.sha256(text.encode()).hexdigest()[:16])
    meta = {k: v for k, v in row.items() if k not in ("prompt", "tests", gold_key)}
    if messages:
        meta["messages"] = messages
    problem = Problem(
        id=pid,
        prompt=text,
        answer=None if answer is None else str(answer),
        tests=row.get("tests"),
        band=str(row.get("band", "all")),
        meta=meta,
    )
    return validate_problem(problem, where, line_no)


def read_problems(path: str | Path) -> list[Problem]:
    path = Path(path)
    if not path.is_file():
        raise DatasetError(
            f"jsonl task: data file {path} not found"
            if not path.exists()
            else f"jsonl task: data file {path} is not a file"
        )
    out = []
    with path.open() as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DatasetError(f"{path}:{line_no}: not valid JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise DatasetError(f"{path}:{line_no}: expected a JSON object, got {type(row).__name__}")
            out.append(row_problem(row, f"{path}:{line_no}", line_no))
    return out


def auto_form(splits) -> str:
    """answer_form "auto" (the default): "number" when every gold answer is a numeral (forms.number_form), so
    that `\\boxed{8-3}` for gold 5 is not paid; "math" (expressions, sets, ...) as soon as one gold is not."""
    from rlvr.tasks.forms import number_form

    golds = [p.answer for ps in splits for p in ps if p.answer is not None]
    return "number" if golds and all(number_form(g, g) is None for g in golds) else "math"


class JsonlTask:
    """Problems from files: either one file split by id hash, or one file per split."""

    name = "jsonl"

    def __init__(
        self,
        path: str | None = None,
        splits: dict | None = None,
        system_prompt: str | None = None,
        answer_form: str = "auto",
        answer_format: str = "boxed",
    ):
        from rlvr.tasks.arithmetic import DEFAULT_SYSTEM, split_of
        from rlvr.tasks.forms import ANSWER_FORMS

        if answer_form != "auto":
            ANSWER_FORMS.check(answer_form, "task.settings.answer_form")
        self.answer_format = check_answer_format(answer_format)
        self.system_prompt = system_prompt or (TAGS_SYSTEM if answer_format == "tags" else DEFAULT_SYSTEM)
        if splits:
            self._splits = {s: read_problems(p) for s, p in splits.items()}
        elif path:
            pool = read_problems(path)
            self._splits = {s: [p for p in pool if split_of(p.id) == s] for s in SPLITS}
        else:
            raise ValueError("jsonl task: give `path` (split by id) or `splits` {train: ..., heldout: ...}")
        self.bands = sorted({p.band for ps in self._splits.values() for p in ps})
        self.answer_form = answer_form if answer_form != "auto" else auto_form(self._splits.values())
        self.grader = default_grader((p for ps in self._splits.values() for p in ps), self.answer_form)

    def problems(self, split: str) -> list[Problem]:
        return self._splits.get(split, [])

    def messages(self, problem: Problem) -> list[dict]:
        return task_messages(self.system_prompt, problem)
