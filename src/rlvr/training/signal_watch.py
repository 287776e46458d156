"""The loop's per-step hook for learning signal (rank 0): say loudly when steps carry none, record it, stop the run.

A step without an informative group makes no update (rlvr.evaluation.learning_signal). The watch says so:
- at a fresh run's first step, when it has no signal: one line with the cause and the remedies;
- when WARN_STREAK steps in a row have none (a run that lost its signal later: collapsed, or solved);
- when train.stop_without_signal steps in a row have none (0 = never): the loop then ends the run at that step, with
  its checkpoint and final model, as the time budget would, and `rlvr train` exits 1.
Each line goes to stderr (above the progress bar) and into RUN/signal.json, which `stopped_without_signal` and a
report read, with what the task's rows give as prompts (text or chat: how to ask for the answer format differs, and
the report says it as the run did). A resumed run counts the streak its metrics.jsonl ends with.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tqdm.auto import tqdm

from rlvr.evaluation.learning_signal import WARN_STREAK, answer_format_of, diagnose, has_signal, trailing_streak
from rlvr.rundir.files import RunDir, atomic_write_text, read_jsonl
from rlvr.tasks.chat import prompt_rows

SIGNAL_FILE = "signal.json"


class SignalWatch:
    """Counts the steps in a row without an informative group; `see` says and records what it finds and returns
    whether the run should stop there."""

    def __init__(
        self,
        run: RunDir,
        limit: int,
        answer_format: str,
        streak: int = 0,
        said: list | None = None,
        prompts: str = "text",
    ):
        self.run, self.limit, self.answer_format, self.prompts = run, limit, answer_format, prompts
        self.streak, self.said = streak, list(said or [])

    @classmethod
    def open(cls, run: RunDir, cfg, start: int, task=None) -> SignalWatch:
        """The watch for a run from `start` on `task` (its train rows decide how the advice asks for the format): on
        a resume, the streak its metrics end with and what it said before."""
        fmt = answer_format_of(cfg.task.settings, cfg.reward.terms)
        prompts = prompt_rows(task.problems("train")) if task is not None else "text"
        if not start:
            return cls(run, cfg.train.stop_without_signal, fmt, prompts=prompts)
        rows = read_jsonl(run.metrics_path, skip_torn=True) if run.metrics_path.exists() else []
        path = run.path / SIGNAL_FILE
        said = json.loads(path.read_text()).get("said", []) if path.exists() else []
        watch = cls(
            run,
            cfg.train.stop_without_signal,
            fmt,
            trailing_streak(rows),
            [s for s in said if s["step"] < start],
            prompts,
        )
        if path.exists():  # the steps after the checkpoint are redone: neither what they said nor a stop stands
            watch._record(None)
        return watch

    def see(self, step: int, row: dict) -> bool:
        """One step's metrics line; True when train.stop_without_signal steps in a row have had no signal."""
        if has_signal(row):
            self.streak = 0
            return False
        self.streak += 1
        stop = bool(self.limit) and self.streak >= self.limit
        line = self.line(step, diagnose(row, self.answer_format, self.prompts), stop)
        if line:
            tqdm.write(line, file=sys.stderr)
            self.said.append({"step": step, "streak": self.streak, "line": line})
            self._record(step if stop else None)
        return stop

    def line(self, step: int, why: str | None, stop: bool) -> str | None:
        """What to say after `step` (None: nothing new): the stop, a fresh run's first step, or a streak."""
        first = step - self.streak + 1
        where = f"step {step}" if first == step else f"steps {first}-{step}"
        if stop:
            return (
                f"WARNING: stopping at step {step + 1}: no learning signal in {where} ({self.streak} in a row, "
                f"train.stop_without_signal = {self.limit}); the checkpoint and final model of step {step + 1} are "
                f"saved in {self.run.path}. {why}."
            )
        if step == 0:
            return f"WARNING: no learning signal at step 0: {why}."
        if self.streak == WARN_STREAK:
            cut = f"the run stops after {self.limit}" if self.limit else "train.stop_without_signal = 0 never stops it"
            return f"WARNING: no learning signal in {where} ({self.streak} in a row; {cut}): {why}."
        return None

    def _record(self, stopped_at: int | None) -> None:
        body = {
            "stop_without_signal": self.limit,
            "answer_format": self.answer_format,
            "prompts": self.prompts,
            "stopped_at": None if stopped_at is None else stopped_at + 1,
            "said": self.said,
        }
        atomic_write_text(self.run.path / SIGNAL_FILE, json.dumps(body, indent=2) + "\n")


def recorded_prompts(run_dir: str | Path) -> str:
    """What the run's task rows give as prompts, as its signal.json recorded it ("text" where it recorded none)."""
    path = Path(run_dir) / SIGNAL_FILE
    return (json.loads(path.read_text()).get("prompts") if path.exists() else None) or "text"


def stopped_without_signal(run_dir: str | Path) -> int | None:
    """The step count a run stopped at for train.stop_without_signal (its signal.json), or None."""
    path = Path(run_dir) / SIGNAL_FILE
    return json.loads(path.read_text()).get("stopped_at") if path.exists() else None


__all__ = ["SIGNAL_FILE", "SignalWatch", "recorded_prompts", "stopped_without_signal"]
