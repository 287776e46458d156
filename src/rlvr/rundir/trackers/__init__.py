"""Experiment trackers: the run as TensorBoard, MLflow, trackio and W&B show it (config `log.report_to`).

The run directory's metrics.jsonl and samples.jsonl stay the source of truth; a tracker gets a copy, on rank 0:
every step's metrics line under the same names (the step as the x axis; the time each line was written, its
time/wall, as the tracker's time where the library takes one: TensorBoard, MLflow, W&B), the resolved config as hyperparameters,
the samples every log.samples_every steps as a table, and at the end of `rlvr run` the held-out tables and the
report's plots. `rlvr export RUN --to NAME` replays a run directory into a tracker after the fact.

Faults: a tracker that is not installed, or cannot write where it should, is a ConfigError before the run starts
(`check_trackers`), and so is one that fails to start; one that fails mid-run prints one warning and is dropped,
and the run goes on, losing nothing in the run directory. Resume: each step shows once (see each adapter).

    base            the Tracker interface and shared helpers
    to_tensorboard  to_mlflow  to_trackio  to_wandb   one adapter per library
"""

from __future__ import annotations

import importlib
import json
import warnings
from pathlib import Path

from rlvr.config import ConfigError
from rlvr.registry import Registry
from rlvr.rundir.files import WALL_TIME, atomic_write_text, read_jsonl
from rlvr.rundir.trackers.base import Resume, Tracker, Where, first_line, numeric
from rlvr.rundir.trackers.to_mlflow import MlflowTracker
from rlvr.rundir.trackers.to_tensorboard import TensorBoardTracker
from rlvr.rundir.trackers.to_trackio import TrackioTracker
from rlvr.rundir.trackers.to_wandb import WandbTracker

# name (as log.report_to spells it, and the pip extra rlvr[<name>]) -> adapter; a tracker of the user's is
# `package.module:attr` in log.report_to, a Tracker subclass
TRACKERS: Registry[type[Tracker]] = Registry("tracker", key="log.report_to")
for _tracker in (TensorBoardTracker, MlflowTracker, TrackioTracker, WandbTracker):
    TRACKERS.add(_tracker.name, _tracker, _tracker.__doc__ or "")
STATE_FILE = "trackers.json"  # in the run directory: each tracker's run ids, to find its run again


class TrackerWarning(UserWarning):
    """A tracker failed mid-run and was dropped; the run directory still holds everything."""


def run_name(log, output_dir) -> str:
    """log.run_name, or the output directory's name."""
    return log.run_name or Path(output_dir).absolute().name


def _make(name: str, run_dir: Path, project: str, name_: str, state: dict) -> Tracker:
    return TRACKERS[name](Where(Path(run_dir), project, name_, state.setdefault(name, {})))


def check_trackers(names, run_dir, project: str = "rlvr") -> None:
    """Before the run starts: each tracker's library imports, and the place it writes to can be written (or its
    server answers)."""
    for name in names:
        cls = TRACKERS[name]
        try:
            importlib.import_module(cls.module)
        except ImportError as e:
            raise ConfigError(
                f"log.report_to lists {name}, but {cls.module} cannot be imported ({first_line(e)}); "
                f'pip install "rlvr[{name}]"'
            ) from None
        problem = _make(name, run_dir, project, "", {}).preflight()
        if problem:
            raise ConfigError(f"log.report_to: {name} {problem}; {cls.setting}")


def read_state(run_dir) -> dict:
    path = Path(run_dir) / STATE_FILE
    return json.loads(path.read_text()) if path.exists() else {}


def resume_point(run_dir, start: int) -> Resume:
    """The run directory's lines before `start`, and the last step metrics.jsonl held (before a resume cuts it)."""
    rows = read_jsonl(Path(run_dir) / "metrics.jsonl", skip_torn=True)
    samples = read_jsonl(Path(run_dir) / "samples.jsonl", skip_torn=True)
    return Resume(
        start,
        max((r.get("step", -1) for r in rows), default=-1),
        [r for r in rows if r.get("step", 0) < start],
        [s for s in samples if s.get("step", 0) < start],
    )


class Trackers:
    """The configured trackers as one: each call goes to every tracker still working. A tracker that raises gets
    one warning and nothing more; `have` holds, per tracker, the last step it already had when it started."""

    def __init__(self, trackers: list[Tracker], run_dir, have: dict | None = None):
        self.active, self.run_dir = list(trackers), Path(run_dir) if run_dir else None
        self.have = have or {}
        self.failed: list[str] = []  # trackers dropped after a failure

    @classmethod
    def open(cls, names, run_dir, *, project: str, run_name: str, config: dict, resume: Resume | None = None):
        """Start every tracker (a fresh run, or one resumed at resume.start), replay the steps each lacks before the
        resume point, and record their run ids in RUN/trackers.json. Any failure: ConfigError, nothing left open."""
        run_dir, state = Path(run_dir), read_state(run_dir)
        out = cls([], run_dir)
        for name in names:
            tracker = _make(name, run_dir, project, run_name, state)
            try:
                out.have[name] = tracker.start(config, resume)
                out.active.append(tracker)
                if resume is not None:
                    out._replay(tracker, resume.rows, resume.samples, until=resume.start)
            except Exception as e:
                out.finish()
                if isinstance(e, ConfigError):
                    raise
                raise ConfigError(
                    f"log.report_to: {name} could not start ({first_line(e)}); {tracker.setting}"
                ) from None
            finally:
                atomic_write_text(run_dir / STATE_FILE, json.dumps(state, indent=1) + "\n")
        return out

    @classmethod
    def reopen(cls, names, run_dir, *, project: str, run_name: str) -> Trackers:
        """The trackers of a finished run, to add to it (the main job's held-out tables); failures are warnings."""
        run_dir, state = Path(run_dir), read_state(run_dir)
        out = cls([], run_dir)
        for name in (n for n in names if n in state):  # the trackers this run was started with
            tracker = _make(name, run_dir, project, run_name, state)
            try:
                tracker.reopen()
                out.active.append(tracker)
            except Exception as e:
                out._warn(tracker, e)
            finally:
                atomic_write_text(run_dir / STATE_FILE, json.dumps(state, indent=1) + "\n")
        return out

    def _replay(self, tracker: Tracker, rows, samples, until: int) -> None:
        """Send `tracker` the lines it lacks before step `until` (raises: the caller decides what a failure means)."""
        by_step: dict[int, list] = {}
        for s in samples:
            by_step.setdefault(s["step"], []).append(s)
        for row in rows:
            step = row["step"]
            if self.have[tracker.name] < step < until:
                tracker.log_metrics(step, numeric(row), row.get(WALL_TIME))
                if step in by_step:
                    tracker.log_samples(step, by_step[step])

    def log_step(self, row: dict, samples: list[dict] | None = None) -> None:
        """One step's metrics line, and its samples when it has them."""
        step, metrics, wall = row["step"], numeric(row), row.get(WALL_TIME)
        for tracker in list(self.active):
            if step <= self.have.get(tracker.name, -1):
                continue  # it keeps its own copy of this step (see Tracker.start)
            if self._call(tracker, "log_metrics", step, metrics, wall) and samples:
                self._call(tracker, "log_samples", step, samples)

    def log_final(self, step: int, tables: dict, images: dict, scalars: dict | None = None) -> None:
        """The end of a run: tables {name: rows}, images {name: png path}, scalars {name: value}, at `step`."""
        for tracker in list(self.active):
            ok = not scalars or self._call(tracker, "log_metrics", step, scalars)
            for name, rows in tables.items():
                ok = ok and self._call(tracker, "log_table", step, name, rows)
            for name, path in images.items():
                ok = ok and self._call(tracker, "log_image", step, name, Path(path))

    def finish(self) -> None:
        for tracker in list(self.active):
            self._call(tracker, "finish")
        self.active = []

    def _call(self, tracker: Tracker, method: str, *args) -> bool:
        try:
            getattr(tracker, method)(*args)
            return True
        except Exception as e:  # a tracker never stops the run
            self._warn(tracker, e)
            try:
                tracker.finish()
            except Exception:
                pass
            return False

    def _warn(self, tracker: Tracker, error: Exception) -> None:
        if tracker in self.active:
            self.active.remove(tracker)
        self.failed.append(tracker.name)
        where = self.run_dir or "RUN"
        warnings.warn(
            f"rlvr: tracker {tracker.name} failed ({first_line(error)}); it gets nothing more from this "
            f"run; {where}/metrics.jsonl and samples.jsonl keep everything "
            f"(rlvr export {where} --to {tracker.name} replays them)",
            TrackerWarning,
            stacklevel=3,
        )


__all__ = [
    "TRACKERS",
    "Tracker",
    "Trackers",
    "TrackerWarning",
    "Resume",
    "check_trackers",
    "resume_point",
    "read_state",
    "run_name",
    "STATE_FILE",
]
