"""What every tracker adapter implements, and the helpers they share: the samples' columns, the config flattened
into hyperparameters, a markdown table, a writability check.

An adapter imports its library only inside its methods: rlvr runs without any tracker installed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlvr.rundir.files import WALL_TIME

# The samples table every tracker gets (samples.jsonl's fields, in reading order).
SAMPLE_COLUMNS = ("step", "problem_id", "band", "prompt", "gold", "completion", "extracted", "status", "reward")


@dataclass
class Resume:
    """Where a resumed run picks up. `start`: the first step the loop runs; `logged_until`: the last step metrics.jsonl
    held before it was cut back to the checkpoint (-1: none); `rows` / `samples`: its lines before `start`."""

    start: int
    logged_until: int = -1
    rows: list = field(default_factory=list)
    samples: list = field(default_factory=list)


@dataclass
class Where:
    """A tracker's run: the run directory, the project (MLflow experiment) and run name, and `state`, what the
    tracker keeps in RUN/trackers.json to find its run again (run ids)."""

    run_dir: Path
    project: str
    run_name: str
    state: dict = field(default_factory=dict)


class Tracker:
    """One tracker. `start` opens the run (fresh, or after a resume) and returns the last step the tracker already
    holds and keeps (-1: none): the caller replays the steps between that one and `resume.start` from the run
    directory, and sends no live step at or below it. `reopen` continues the recorded run (the main job's
    held-out tables and plots). Every step arrives under metrics.jsonl's names, the step as the x axis, with
    `wall_time`, the Unix time its line was written (metrics.jsonl's time/wall; None for a line from before rlvr
    recorded it, and for the end-of-run figures): a replay keeps each step's own time where the library takes one."""

    name = ""  # as log.report_to spells it; also the pip extra: rlvr[<name>]
    module = ""  # the library's top-level module, imported lazily
    setting = ""  # what to fix when the tracker cannot write where it should

    def __init__(self, where: Where):
        self.where = where
        self.state = where.state

    def location(self) -> Path | None:
        """The local folder it writes to, or None (a server)."""
        return None

    def preflight(self) -> str | None:
        """Checked before the run starts, without starting anything: why the tracker could not work, or None."""
        where = self.location()
        problem = unwritable(where) if where is not None else None
        return f"cannot write to {where} ({problem})" if problem else None

    def start(self, config: dict, resume: Resume | None) -> int:
        raise NotImplementedError

    def reopen(self) -> None:
        raise NotImplementedError

    def log_metrics(self, step: int, metrics: dict, wall_time: float | None = None) -> None:
        raise NotImplementedError

    def log_samples(self, step: int, rows: list[dict]) -> None:
        raise NotImplementedError

    def log_table(self, step: int, name: str, rows: list[dict]) -> None:
        raise NotImplementedError

    def log_image(self, step: int, name: str, path: Path) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        raise NotImplementedError


def numeric(row: dict) -> dict:
    """A metrics line's numbers (NaN kept, null dropped, a bool as 0 or 1), without the step and its wall time (a
    tracker's time axis, not a curve): the scalars every tracker plots."""
    return {k: float(v) for k, v in row.items() if k not in ("step", WALL_TIME) and isinstance(v, (int, float))}


def flatten(cfg: dict, prefix: str = "") -> dict:
    """{'train': {'lr': 1e-5}} -> {'train.lr': 1e-05}; lists become JSON text (hyperparameters are scalars)."""
    out = {}
    for key, value in cfg.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, name + "."))
        elif isinstance(value, (bool, int, float, str)):
            out[name] = value
        else:
            out[name] = json.dumps(value)
    return out


class RunLogTracker(Tracker):
    """A tracker whose library logs through `run.log({name: value}, step=)` with `Table(columns=, data=)` and
    `Image(path)` from its top-level module: trackio and W&B share this shape. Subclasses set `self.run`; `log`
    takes no time of its own (a subclass whose library takes one overrides log_metrics and `_log`)."""

    run: Any = None  # the library's run object (trackio's, W&B's): no shared type

    def _lib(self):
        import importlib

        return importlib.import_module(self.module)

    def _log(self, payload: dict, step: int) -> None:
        self.run.log(payload, step=step)

    def log_metrics(self, step: int, metrics: dict, wall_time: float | None = None) -> None:
        self._log(metrics, step)

    def log_samples(self, step: int, rows: list[dict]) -> None:
        cols, data = sample_table(rows)
        self._log({"samples": self._lib().Table(columns=cols, data=data)}, step)

    def log_table(self, step: int, name: str, rows: list[dict]) -> None:
        cols = table_columns(rows)
        self._log({name: self._lib().Table(columns=cols, data=[[r.get(c) for c in cols] for r in rows])}, step)

    def log_image(self, step: int, name: str, path: Path) -> None:
        self._log({name: self._lib().Image(str(path))}, step)


def table_columns(rows: list[dict]) -> list[str]:
    """The columns of a list of row dicts, in first-seen order."""
    return list(dict.fromkeys(k for r in rows for k in r))


def sample_table(rows: list[dict]) -> tuple[list[str], list[list]]:
    """(columns, data) of samples rows, SAMPLE_COLUMNS first."""
    cols = [c for c in SAMPLE_COLUMNS if any(c in r for r in rows)]
    cols += [c for c in table_columns(rows) if c not in cols]
    return cols, [[r.get(c) for c in cols] for r in rows]


def _cell(value) -> str:
    text = "" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", "").replace("\n", "<br>")


def markdown_table(columns: list[str], data: list[list]) -> str:
    """A markdown table; cells escape '|' and carry newlines as <br> (TensorBoard renders its text as markdown)."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in data]
    return "\n".join(lines)


def unwritable(path: Path) -> str | None:
    """Why nothing can be written at `path` (its nearest existing folder is a file, or not writable), or None."""
    p = Path(path).absolute()
    while not p.exists() and p.parent != p:
        p = p.parent
    if not p.is_dir():
        return f"{p} is not a directory"
    if not os.access(p, os.W_OK | os.X_OK):
        return f"{p} is not writable"
    return None


def first_line(error: BaseException, limit: int = 300) -> str:
    """An exception as one short line (messages here must fit one line)."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
