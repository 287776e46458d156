"""MLflow: a run in the experiment `log.project`, in the file store RUN/mlruns unless MLFLOW_TRACKING_URI names another
store or a server (`mlflow ui --backend-store-uri runs/X/mlruns`).

MLflow 3 keeps its file store in maintenance mode and refuses it unless MLFLOW_ALLOW_FILE_STORE=true: for a file
store (the default here, or a file: URI) rlvr sets that variable in its own process when it is unset. Metrics under
metrics.jsonl's names with the step and the time each line was written (an export's too); the config as params (dotted keys); samples and tables as JSON artifacts in
MLflow's table layout ({"columns", "data"}); plots as image artifacts. MLflow cannot drop a metric's later values,
so a resumed run starts a new MLflow run (same name), the run directory's lines before the resume point are
replayed into it, and the old one is deleted (MLflow's soft delete: `mlflow gc` removes it for good).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from urllib.parse import urlparse

from rlvr.rundir.trackers.base import Resume, Tracker, first_line, flatten, sample_table, table_columns

MAX_METRICS, MAX_PARAMS, MAX_PARAM_CHARS = 1000, 100, 6000  # MLflow's log_batch limits
PROBE_S = 10.0  # how long a tracking server has to answer before the run starts
_NOT_IN_NAMES = re.compile(r"[^\w\-. /:]")  # MLflow's metric and param names take only these characters


def mlflow_name(key: str) -> str:
    """A metric or param name MLflow accepts: any other character becomes '_' (rlvr's own names need none)."""
    return _NOT_IN_NAMES.sub("_", key)


class MlflowTracker(Tracker):
    """MLflow: a run in RUN/mlruns or MLFLOW_TRACKING_URI (extra rlvr[mlflow])"""

    name = "mlflow"
    module = "mlflow"
    setting = "set MLFLOW_TRACKING_URI to a writable store or a reachable server (default: RUN/mlruns)"

    def uri(self) -> str:
        return os.environ.get("MLFLOW_TRACKING_URI") or (self.where.run_dir / "mlruns").absolute().as_uri()

    def location(self) -> Path | None:
        parsed = urlparse(self.uri())
        if parsed.scheme == "file":
            return Path(parsed.path)
        return Path(self.uri()) if parsed.scheme == "" else None

    def preflight(self) -> str | None:
        """A file store must be writable; a tracking server must answer (any HTTP status) within PROBE_S seconds,
        where MLflow itself would retry for minutes."""
        if urlparse(self.uri()).scheme not in ("http", "https"):
            return super().preflight()
        import urllib.error
        import urllib.request

        try:
            urllib.request.urlopen(self.uri().rstrip("/") + "/health", timeout=PROBE_S).close()
        except urllib.error.HTTPError:
            return None  # it answered
        except (OSError, ValueError) as e:
            return f"cannot reach the tracking server {self.uri()} ({first_line(getattr(e, 'reason', e))})"
        return None

    def _client(self):
        if self.location() is not None:
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self.uri())

    def start(self, config: dict, resume: Resume | None) -> int:
        from mlflow.entities import Param

        self.client = client = self._client()
        exp = client.get_experiment_by_name(self.where.project)
        if exp is not None and exp.lifecycle_stage == "deleted":
            client.restore_experiment(exp.experiment_id)
        exp_id = exp.experiment_id if exp is not None else client.create_experiment(self.where.project)
        old = self.state.get("run_id")
        run = client.create_run(
            exp_id, run_name=self.where.run_name, tags={"rlvr.run_dir": str(self.where.run_dir.absolute())}
        )
        self.run_id = run.info.run_id
        self.state.update(run_id=self.run_id, experiment_id=exp_id)
        if old and resume is not None:  # the new run gets the history replayed; the old one goes
            client.delete_run(old)
        params = [Param(mlflow_name(k), str(v)[:MAX_PARAM_CHARS]) for k, v in flatten(config).items()]
        for i in range(0, len(params), MAX_PARAMS):
            client.log_batch(self.run_id, params=params[i : i + MAX_PARAMS])
        return -1

    def reopen(self) -> None:
        self.client = self._client()
        self.run_id = self.state["run_id"]
        self.client.get_run(self.run_id)  # raises when it is gone

    def log_metrics(self, step: int, metrics: dict, wall_time: float | None = None) -> None:
        from mlflow.entities import Metric

        ms = int((time.time() if wall_time is None else wall_time) * 1000)  # MLflow's timestamps are milliseconds
        items = [Metric(mlflow_name(k), v, ms, step) for k, v in metrics.items()]
        for i in range(0, len(items), MAX_METRICS):
            self.client.log_batch(self.run_id, metrics=items[i : i + MAX_METRICS])

    def log_samples(self, step: int, rows: list[dict]) -> None:
        cols, data = sample_table(rows)
        self.client.log_dict(self.run_id, {"columns": cols, "data": data}, f"samples/step-{step:06d}.json")

    def log_table(self, step: int, name: str, rows: list[dict]) -> None:
        cols = table_columns(rows)
        self.client.log_dict(
            self.run_id, {"columns": cols, "data": [[r.get(c) for c in cols] for r in rows]}, f"{name}.json"
        )

    def log_image(self, step: int, name: str, path: Path) -> None:
        self.client.log_artifact(self.run_id, str(path), str(Path(name).parent) if "/" in name else None)

    def finish(self) -> None:
        self.client.set_terminated(self.run_id)
