"""TensorBoard: event files under RUN/tensorboard (`tensorboard --logdir runs/`), through torch's SummaryWriter.

Scalars under metrics.jsonl's names, each at the time its line was written (an export's too); the config as hyperparameters (the HPARAMS tab) and as YAML text; samples and
tables as markdown text; plots as images. A resumed run opens its writer with purge_step at the resume point, so
TensorBoard drops the events of the steps the loop redoes (each step shows once).
"""

from __future__ import annotations

from pathlib import Path

from rlvr.rundir.trackers.base import Resume, Tracker, flatten, markdown_table, sample_table, table_columns

# Columns the HPARAMS tab shows next to the hyperparameters (scalar tags of the same run).
HPARAM_METRICS = ("reward/mean", "verdict/correct_frac", "val/accuracy")


class TensorBoardTracker(Tracker):
    """TensorBoard: event files under RUN/tensorboard (extra rlvr[tensorboard])"""

    name = "tensorboard"
    module = "tensorboard"
    setting = "the run directory must be writable (RUN/tensorboard)"

    def location(self) -> Path:
        return self.where.run_dir / "tensorboard"

    def start(self, config: dict, resume: Resume | None) -> int:
        from torch.utils.tensorboard import SummaryWriter

        logdir = self.location()
        existed = logdir.is_dir() and any(logdir.glob("events.out.tfevents.*"))
        purge = resume.start if resume is not None else None
        self.writer = SummaryWriter(str(logdir), purge_step=purge, flush_secs=30)
        self._config(config)
        return purge - 1 if existed and purge is not None else -1

    def reopen(self) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(self.location()), flush_secs=30)

    def _config(self, config: dict) -> None:
        import yaml
        from torch.utils.tensorboard.summary import hparams

        flat = flatten(config)
        for summary in hparams(flat, {k: 0.0 for k in HPARAM_METRICS}):
            self.writer.file_writer.add_summary(summary)  # type: ignore[attr-defined]  # made by SummaryWriter()
        self.writer.add_text("config", "```yaml\n" + yaml.safe_dump(config, sort_keys=False) + "```", 0)

    def log_metrics(self, step: int, metrics: dict, wall_time: float | None = None) -> None:
        for key, value in metrics.items():  # walltime None: SummaryWriter stamps the present
            self.writer.add_scalar(key, value, step, walltime=wall_time)
        self.writer.flush()  # a killed run keeps every step it logged (a resume purges what is redone)

    def log_samples(self, step: int, rows: list[dict]) -> None:
        self.writer.add_text("samples", markdown_table(*sample_table(rows)), step)
        self.writer.flush()

    def log_table(self, step: int, name: str, rows: list[dict]) -> None:
        cols = table_columns(rows)
        self.writer.add_text(name, markdown_table(cols, [[r.get(c) for c in cols] for r in rows]), step)

    def log_image(self, step: int, name: str, path: Path) -> None:
        import numpy as np
        from PIL import Image

        with Image.open(path) as image:
            pixels = np.asarray(image.convert("RGB"))
        self.writer.add_image(name, pixels, step, dataformats="HWC")

    def finish(self) -> None:
        self.writer.close()
