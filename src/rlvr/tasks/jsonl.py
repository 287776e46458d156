"""A task read from a local JSON-lines file: one problem per line, optional `id` and `band`.

- `prompt` (or `problem`): the question as text, or as chat messages (a list of {"role", "content"}, the
  conversational form TRL and hub datasets use, tool-call demonstrations included: rlvr.tasks.chat): the messages
  are kept whole, system turn and few-shot turns included, and the task's system prompt is added only when they
  have no system turn.
- `id`: unique in its file (an id decides the problem's split); a row without one is named by its question's hash.
- the gold answer: the first of `answer`, `gold`, `solution`, `ground_truth` the row has (the gold-column rule,
  rlvr.tasks.base.GOLD_COLUMNS, shared with `rlvr verify` and the integrations); or hidden `tests` (code).
- `answer_form` (task setting): "auto" (default: "number" when every gold is a numeral, else "math"), "math" or
  "number" (rlvr.tasks.forms): what an answer must look like before it is compared.
- `answer_format` (task setting): "boxed" (default) or "tags" (<think> then <answer>, the R1 format): how the
  default system prompt asks for the answer, and how the reward reads it.
- `demo` (task setting): "auto" (default), "none", or a solved exchange of your own as chat messages: the
  demonstration shown before each text question (rlvr.tasks.demo; "auto" shows the easiest band's first training
  problem, answered in the answer format). Chat rows are used as written: a demonstration of your own when every row
  is chat messages, or a system_prompt when every row has its own system turn, is refused (rlvr.tasks.chat).
A bad row fails the load with its file and line, before anything is written; so does a gold that does not have
the task's answer form itself (`"about 40"` under `number`), which no reply could match."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rlvr.errors import ConfigError
from rlvr.tasks.base import (
    SPLITS,
    DatasetError,
    Problem,
    check_answer_format,
    default_grader,
    gold_column,
    system_prompt_for,
    task_messages,
    validate_problem,
)
from rlvr.tasks.chat import chat_prompt, check_settings_apply

PROMPT_COLUMNS = ("prompt", "problem")


def row_problem(row: dict, where: str, line_no: int) -> Problem:
    """One validated Problem from one data row (see the module doc)."""
    column = next((k for k in PROMPT_COLUMNS if k in row), None)
    if column is None:  # a `question` or `input` column is not read as the prompt: say so, not "empty prompt"
        raise DatasetError(
            f"{where}: no prompt column (give `prompt` or `problem`: the question as text, or chat messages); "
            f"the row's columns: {', '.join(row) or '(none)'}"
        )
    text, messages = chat_prompt(row[column], where)
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
    return [p for _, p in read_located(path)]


def read_located(path: str | Path) -> list[tuple[str, Problem]]:
    """("FILE:LINE", Problem) for each row of a file; a bad row or a repeated id is a DatasetError."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(
            f"jsonl task: data file {path} not found"
            if not path.exists()
            else f"jsonl task: data file {path} is not a file"
        )
    out, first = [], dict[str, int]()
    with path.open() as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:  # without its newline, a line cut short reads as the unterminated string it is
                row = json.loads(line.rstrip("\r\n"))
            except json.JSONDecodeError as e:  # json's whole message: its column and char say where in the line
                raise DatasetError(f"{path}:{line_no}: not valid JSON: {e}") from None
            if not isinstance(row, dict):
                raise DatasetError(f"{path}:{line_no}: expected a JSON object, got {type(row).__name__}")
            problem = row_problem(row, f"{path}:{line_no}", line_no)
            if problem.id in first:
                raise DatasetError(repeated_id(path, first[problem.id], line_no, problem))
            first[problem.id] = line_no
            out.append((f"{path}:{line_no}", problem))
    return out


def repeated_id(path: Path, first: int, line_no: int, problem: Problem) -> str:
    if problem.meta.get("id"):
        return (
            f"{path}: lines {first} and {line_no} have the same id {problem.id!r}; ids must be unique (an id decides "
            f"the problem's split and names it in the records)"
        )
    return (
        f"{path}: lines {first} and {line_no} ask the same question and have no id (a row without one is named "
        f"by its question); give each an id, or drop the repeat"
    )


def check_golds(located: list[tuple[str, Problem]], form: str) -> None:
    """Every gold must have the answer form it asks of replies: a gold outside it could never be matched (`"about
    40"` under `number`), so the load stops at its line."""
    from rlvr.tasks.forms import ANSWER_FORMS, check_form

    takes = {e.name: e.doc for e in ANSWER_FORMS.entries()}.get(form)
    for where, p in located:
        why = None if p.answer is None else check_form(form, p.answer, p.answer)
        if why:
            raise DatasetError(
                f"{where}: gold {p.answer!r} under answer_form {form}: {why}; "
                + (f"{form} takes {takes} " if takes else "")
                + "(fix the gold, or set task.settings.answer_form: math)"
            )


def auto_form(splits) -> str:
    """answer_form "auto" (the default): "number" when every gold answer is a numeral (forms.number_form), so
    that `\\boxed{8-3}` for gold 5 is not paid; "math" (expressions, sets, ...) as soon as one gold is not."""
    from rlvr.tasks.forms import number_form

    golds = [p.answer for ps in splits for p in ps if p.answer is not None]
    return "number" if golds and all(number_form(g, g) is None for g in golds) else "math"


def check_splits(splits) -> dict:
    """`splits` as given, once each key is a split: `{training: ...}` would leave the train split empty and fail
    far from the mistake, so it is named here, before a file is read."""
    if not isinstance(splits, dict):
        raise ConfigError(f"task.settings.splits: give a mapping {{train: FILE, heldout: FILE}}, got {splits!r}")
    for key in splits:
        if key not in SPLITS:
            raise ConfigError(f"task.settings.splits.{key}: not a split; choose from {', '.join(SPLITS)}")
    return splits


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
        demo: str | list = "auto",
    ):
        from rlvr.tasks.arithmetic import DEFAULT_SYSTEM, split_of
        from rlvr.tasks.demo import check_demo, resolve_demo
        from rlvr.tasks.forms import ANSWER_FORMS

        if answer_form != "auto":
            ANSWER_FORMS.check(answer_form, "task.settings.answer_form")
        self.answer_format = check_answer_format(answer_format)
        self.system_prompt = system_prompt_for(answer_format, system_prompt, DEFAULT_SYSTEM)
        check_demo(demo, answer_format)  # a mistake in the setting before a file is read
        if splits:
            located = {s: read_located(p) for s, p in check_splits(splits).items()}
            self._splits = {s: [p for _, p in rows] for s, rows in located.items()}
        elif path:
            located = {"all": read_located(path)}
            self._splits = {s: [p for _, p in located["all"] if split_of(p.id) == s] for s in SPLITS}
        else:
            raise ValueError("jsonl task: give `path` (split by id) or `splits` {train: ..., heldout: ...}")
        self.bands = sorted({p.band for ps in self._splits.values() for p in ps})
        self.answer_form = answer_form if answer_form != "auto" else auto_form(self._splits.values())
        check_golds([row for rows in located.values() for row in rows], self.answer_form)
        every = [p for ps in self._splits.values() for p in ps]
        check_settings_apply(every, path or ", ".join(map(str, (splits or {}).values())), demo, system_prompt)
        self.grader = default_grader((p for ps in self._splits.values() for p in ps), self.answer_form)
        # last, on the data as read: its question leaves the train split (rlvr.tasks.demo says why)
        self.demo, self._splits = resolve_demo(demo, self._splits, answer_format)

    def problems(self, split: str) -> list[Problem]:
        return self._splits.get(split, [])

    def messages(self, problem: Problem) -> list[dict]:
        return task_messages(self.system_prompt, problem, self.demo)
