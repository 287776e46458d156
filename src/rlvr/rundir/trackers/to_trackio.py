"""trackio: a run in project `log.project` in trackio's own local store (`trackio show`), which is TRACKIO_DIR or
~/.cache/huggingface/trackio. trackio fixes that folder when it is first imported, for every project at once,
so rlvr leaves it where `trackio show` looks rather than moving it into the run directory.

Metrics under metrics.jsonl's names with the step (trackio's `log` takes no time: it stamps each line when it is
logged, so an export's lines carry the export's time); the config as the run's config; samples and tables as
trackio.Table; plots as trackio.Image. trackio cannot drop a run's later steps through its API, so a resumed
run starts a new trackio run of the same name, the run directory's lines before the resume point are replayed
into it, and the old run (recorded in RUN/trackers.json) is deleted from the store.
"""

from __future__ import annotations

from pathlib import Path

from rlvr.rundir.trackers.base import Resume, RunLogTracker


class TrackioTracker(RunLogTracker):
    """trackio: a run in trackio's local store (extra rlvr[trackio])"""

    name = "trackio"
    module = "trackio"
    setting = "set TRACKIO_DIR to a writable folder"

    def location(self) -> Path:
        from trackio.utils import TRACKIO_DIR

        return Path(TRACKIO_DIR)

    def _init(self, config: dict | None, resume: str):
        import trackio

        # no dashboard, no background CPU/GPU sampling: only what rlvr logs
        self.run = trackio.init(
            project=self.where.project,
            name=self.where.run_name,
            config=config,
            resume=resume,
            embed=False,
            auto_log_cpu=False,
            auto_log_gpu=False,
        )
        self.state.update(id=self.run.id, name=self.run.name)

    def start(self, config: dict, resume: Resume | None) -> int:
        old, old_name = self.state.get("id"), self.state.get("name")
        if old and old_name and resume is not None:
            from trackio.sqlite_storage import SQLiteStorage

            SQLiteStorage.delete_run(self.where.project, old_name, run_id=old)
        self._init(config, "never")
        return -1

    def reopen(self) -> None:
        self._init(None, "must")
        if self.run.id != self.state["id"]:
            raise RuntimeError(f"trackio run {self.state['name']} ({self.state['id']}) is not the newest of its name")

    def finish(self) -> None:
        import trackio
        from trackio import context_vars

        if context_vars.current_run.get() is self.run:
            trackio.finish()  # also forgets the run, so that trackio's exit hook does not finish it a second time
        else:
            self.run.finish()
