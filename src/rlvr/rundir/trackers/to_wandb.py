"""Weights & Biases: offline, without an account, unless the user set WANDB_MODE; the run's files go under
RUN/wandb unless WANDB_DIR is set (`wandb sync RUN/wandb/offline-run-*` uploads them later).

Metrics under metrics.jsonl's names with the step (W&B groups them by prefix), each at the time its line was
written (W&B's `_timestamp`, which `log` keeps when given: an export's too); the config as the run's config;
samples and tables as wandb.Table; plots as wandb.Image. The run id is kept in RUN/trackers.json, so a resumed run
continues the same W&B run. W&B cannot drop logged steps: when every segment of the run is still offline and
unsynced (the default), a resume deletes those local segments and starts the run afresh with the same id, and
the run directory's lines before the resume point are replayed into it; otherwise (online, or synced) the run is
resumed as W&B resumes runs, and the steps it already holds are not sent again (W&B ignores a step that is not
past its last one): those keep their first values, the same numbers as the redone ones except wall-clock timings
(a resume is exact) unless the config was changed with --allow-config-change.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Literal

from rlvr.rundir.trackers.base import Resume, RunLogTracker


class WandbTracker(RunLogTracker):
    """Weights & Biases: an offline run under RUN/wandb unless WANDB_MODE says otherwise (extra rlvr[wandb])"""

    name = "wandb"
    module = "wandb"
    setting = "set WANDB_DIR to a writable folder (default: the run directory)"

    def location(self) -> Path:
        return Path(os.environ["WANDB_DIR"]) if os.environ.get("WANDB_DIR") else self.where.run_dir

    @staticmethod
    def _offline() -> bool:
        return os.environ.get("WANDB_MODE", "offline") in ("offline", "dryrun")

    def _segments(self, run_id: str) -> list[Path]:
        """This run's local folders: offline-run-<time>-<id> (offline) and run-<time>-<id> (online)."""
        return sorted(p for p in (self.location() / "wandb").glob(f"*run-*-{run_id}") if p.is_dir())

    def _init(self, config: dict | None, run_id: str, resume: Literal["allow"] | None) -> None:
        import wandb

        # W&B names a segment's folder by the second it started: two segments of one id in one second would collide
        wait = self.state.get("started", 0) + 1 - time.time()
        if wait > 0:
            time.sleep(wait)
        self.run = wandb.init(
            project=self.where.project,
            name=self.where.run_name,
            id=run_id,
            config=config,
            resume=resume,
            dir=None if os.environ.get("WANDB_DIR") else str(self.where.run_dir),
            mode=None if os.environ.get("WANDB_MODE") else "offline",
            settings=wandb.Settings(console="off"),
        )
        self.state.update(id=run_id, started=int(time.time()))

    def start(self, config: dict, resume: Resume | None) -> int:
        run_id = self.state.get("id")
        if run_id and resume is not None:
            segments = self._segments(run_id)
            local_only = self._offline() and all(
                p.name.startswith("offline-run-") and not any(p.glob("*.wandb.synced")) for p in segments
            )
            if local_only:
                for p in segments:
                    shutil.rmtree(p)
            else:
                self._init(config, run_id, "allow")
                return resume.logged_until
        self._init(config, run_id or uuid.uuid4().hex[:12], None)
        return -1

    def reopen(self) -> None:
        self._init(None, self.state["id"], "allow")

    def log_metrics(self, step: int, metrics: dict, wall_time: float | None = None) -> None:
        self.wall = (step, wall_time)
        self._log(metrics, step)

    def _log(self, payload: dict, step: int) -> None:
        # W&B merges a step's log calls into one history row, whose _timestamp is the last call's: the step's
        # samples table must carry the step's time too, or it stamps the row with the present
        at, wall = getattr(self, "wall", (None, None))
        self.run.log({**payload, "_timestamp": wall} if wall is not None and at == step else payload, step=step)

    def finish(self) -> None:
        self.run.finish()
