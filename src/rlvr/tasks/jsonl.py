"""A task read from a local JSON-lines file: one problem per line, optional `id` and `band`.

Data sets as people hold them load with no column setting: ours and TRL's (`prompt`, `answer`), GSM8K's (`question`,
`answer` as a worked solution ending `#### 72`), DeepMath's (`question`, `final_answer`, `difficulty`), MATH's
(`problem`, `solution`, `level`).
- the question: the first of `prompt`, `problem`, `question` the row has (rlvr.tasks.base.PROMPT_COLUMNS), as text
  or as chat messages (a list of {"role", "content"}, the conversational form TRL and hub datasets use, tool-call
  demonstrations included: rlvr.tasks.chat): the messages are kept whole, system turn and few-shot turns included,
  and the task's system prompt is added only when they have no system turn.
- `id`: unique in its file (an id decides the problem's split); a row without one is named by its question's hash.
- the gold answer: the first of `answer`, `gold`, `solution`, `ground_truth`, `final_answer` the row has (the
  gold-column rule, rlvr.tasks.base.GOLD_COLUMNS, shared with `rlvr verify` and the integrations); or hidden `tests`
  (code). A worked gold (GSM8K's `WORK\n#### 72`) is the gold 72; its work is the problem's reasoning trace (for
  `rlvr sft --set sft.source=reference` and for a demonstration; rlvr.tasks.demo.add_traces).
- the band: `band` as written, else a difficulty column (`difficulty`, `level`; numbers in bands of width 2).
- `prompt_field`, `answer_field`, `band_field` (task settings): name other columns, as the hub task's do.
- `answer_form` (task setting): "auto" (default: "number" when every gold is a numeral, else "math"), "math" or
  "number" (rlvr.tasks.forms): what an answer must look like before it is compared.
- `answer_format` (task setting): "boxed" (default) or "tags" (<think> then <answer>, the R1 format): how the
  default system prompt asks for the answer (rlvr.tasks.base.REASONING_SYSTEM: step by step, then the answer), and
  how the reward reads it.
- `demo` (task setting): "auto" (default), "none", or a solved exchange of your own as chat messages: the
  demonstration shown before each text question (rlvr.tasks.demo: "auto" is decided by measurement on the start model,
  rlvr.evaluation.demo_choice). Chat rows are used as written: a demonstration of your own when every row is chat
  messages, or a system_prompt when every row has its own system turn, is refused (rlvr.tasks.chat).
A bad row fails the load with its file and line, before anything is written; so does a gold that does not have
the task's answer form itself (`"about 40"` under `number`), which no reply could match."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from rlvr.errors import ConfigError
from rlvr.tasks.base import (
    BAND_COLUMNS,
    PROMPT_COLUMNS,
    REASONING_SYSTEM,
    SPLITS,
    DatasetError,
    Problem,
    band_of,
    check_answer_format,
    default_grader,
    gold_column,
    system_prompt_for,
    task_messages,
    validate_problem,
    worked_gold,
)
from rlvr.tasks.chat import chat_prompt, check_settings_apply
from rlvr.tasks.demo import demo_options


@dataclass(frozen=True)
class Columns:
    """Which column of a row holds what: None for each means the rule (the first present of
    rlvr.tasks.base.PROMPT_COLUMNS, GOLD_COLUMNS, BAND_COLUMNS); a task setting (`prompt_field`, `answer_field`,
    `band_field`) names a column of the data's own."""

    prompt: str | None = None
    answer: str | None = None
    band: str | None = None

    def of_prompt(self, row: dict) -> str | None:
        return self.prompt if self.prompt is not None else next((k for k in PROMPT_COLUMNS if k in row), None)

    def of_answer(self, row: dict) -> str | None:
        if self.answer is not None:
            return self.answer if row.get(self.answer) is not None else None
        return gold_column(row)

    def band_of(self, row: dict) -> str:
        """The row's band: a `band` column as written, a difficulty (DeepMath's 1..10) in bands of width 2."""
        key = self.band if self.band is not None else next((k for k in BAND_COLUMNS if k in row), None)
        if key is None or row.get(key) is None:
            return "all"
        return str(row[key]) if key == "band" else band_of(row[key])


def row_problem(row: dict, where: str, line_no: int, columns: Columns = Columns(), id_prefix: str = "row-") -> Problem:
    """One validated Problem from one data row (see the module doc). A worked gold (GSM8K's `... #### 72`) is its
    final answer, the work kept as `meta["reasoning"]`."""
    column = columns.of_prompt(row)
    if column is None or column not in row:  # an `input` column is not read as the prompt: say so, not "empty prompt"
        named = f"no column {column!r}" if column else "no prompt column"
        raise DatasetError(
            f"{where}: {named} (give {' or '.join(f'`{k}`' for k in PROMPT_COLUMNS)}: the question as text, or chat "
            f"messages; or name the column with task.settings.prompt_field); the row's columns: "
            f"{', '.join(row) or '(none)'}"
        )
    text, messages = chat_prompt(row[column], where)
    gold_key = columns.of_answer(row)
    answer, work = (None, None) if gold_key is None else worked_gold(row[gold_key])
    pid = str(row.get("id") or id_prefix + hashlib.sha256(text.encode()).hexdigest()[:16])
    meta = {k: v for k, v in row.items() if k not in (column, "tests", gold_key)}
    if messages:
        meta["messages"] = messages
    if work:
        meta["reasoning"] = work
    problem = Problem(
        id=pid,
        prompt=text,
        answer=answer,
        tests=row.get("tests"),
        band=columns.band_of(row),
        meta=meta,
    )
    return validate_problem(problem, where, line_no)


def read_problems(path: str | Path, columns: Columns = Columns()) -> list[Problem]:
    return [p for _, p in read_located(path, columns)]


def read_located(path: str | Path, columns: Columns = Columns()) -> list[tuple[str, Problem]]:
    """("FILE:LINE", Problem) for each row of a file; a bad row or a repeated id is a DatasetError."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(
            f"jsonl task: data file {path} not found"
            + ("" if path.is_absolute() else " (a relative path is read from the working directory, not the config's)")
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
            problem = row_problem(row, f"{path}:{line_no}", line_no, columns)
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
        prompt_field: str | None = None,
        answer_field: str | None = None,
        band_field: str | None = None,
    ):
        from rlvr.tasks.arithmetic import split_of
        from rlvr.tasks.demo import add_traces, check_demo, resolve_demo
        from rlvr.tasks.forms import ANSWER_FORMS

        if answer_form != "auto":
            ANSWER_FORMS.check(answer_form, "task.settings.answer_form")
        self.answer_format = check_answer_format(answer_format)
        self.system_prompt = system_prompt_for(answer_format, system_prompt, REASONING_SYSTEM)
        check_demo(demo, answer_format)  # a mistake in the setting before a file is read
        columns = Columns(prompt_field, answer_field, band_field)
        if splits:
            located = {s: read_located(p, columns) for s, p in check_splits(splits).items()}
            self._splits = {s: [p for _, p in rows] for s, rows in located.items()}
        elif path:
            located = {"all": read_located(path, columns)}
            self._splits = {s: [p for _, p in located["all"] if split_of(p.id) == s] for s in SPLITS}
        else:
            raise ValueError("jsonl task: give `path` (split by id) or `splits` {train: ..., heldout: ...}")
        self.bands = sorted({p.band for ps in self._splits.values() for p in ps})
        self.answer_form = answer_form if answer_form != "auto" else auto_form(self._splits.values())
        check_golds([row for rows in located.values() for row in rows], self.answer_form)
        every = [p for ps in self._splits.values() for p in ps]
        check_settings_apply(every, path or ", ".join(map(str, (splits or {}).values())), demo, system_prompt)
        self.grader = default_grader((p for ps in self._splits.values() for p in ps), self.answer_form)
        add_traces(every, answer_format)  # a worked gold's work, as `rlvr sft` and a demonstration show it
        # last, on the data as read: its question leaves the train split (rlvr.tasks.demo says why)
        self._train_all = self._splits.get("train", [])
        self.demo, self._splits = resolve_demo(demo, self._splits, answer_format)
        self.demo_options = demo_options(demo, self.demo)

    def problems(self, split: str) -> list[Problem]:
        return self._splits.get(split, [])

    def messages(self, problem: Problem) -> list[dict]:
        return task_messages(self.system_prompt, problem, self.demo)
