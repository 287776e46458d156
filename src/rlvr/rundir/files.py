"""The run directory: resolved config, one JSON line of metrics per step, sampled completions, all written
so that a crash never leaves a half-written file that a resume would trust; held by one live process at a time."""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: no lock, the rest works
    fcntl = None  # type: ignore[assignment]  # the module or None: callers test for None

# held (flock) by the process writing the run: a second one, or --overwrite of a run that is still stopping, is
# refused instead of interleaving two runs' lines and checkpoints in one folder
LOCK_FILE = ".rlvr.lock"
# Each metrics line's wall-clock time (Unix seconds) when it was written: a tracker's time axis, in the live run and in
# `rlvr export` alike. Under time/, with the other wall-clock figures a resumed run does not reproduce.
WALL_TIME = "time/wall"


class RunDirError(RuntimeError):
    """The output directory cannot be used as asked (exists, unwritable, full)."""


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write to a temporary file in the same folder, fsync, then rename over the target: a crash never leaves
    half a file. The file is world-readable like any ordinary output (mkstemp alone would make it 0600)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _clean(value):
    """JSON has no NaN: non-finite floats are written as null, so a reader never chokes on a metrics line."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


RUN_CHOICES = "pass --resume to continue it or --overwrite to replace it"


def check_output_dir(
    path: str | Path, *, resume: bool = False, overwrite: bool = False, choices: str = RUN_CHOICES
) -> None:
    """Refuse, as RunDir would, an output directory that cannot be used, without creating or removing anything:
    callers check it before slow work (loading the model) that must come before the directory is made. `choices`:
    what the refusal of an existing one offers (a verb without --resume offers less)."""
    path = Path(path)
    holder = _live_holder(path)
    if holder is not None:
        raise RunDirError(
            f"output directory {path} is in use by a running rlvr process (pid {holder}); wait for it to stop "
            "(a stopped run finishes its step and saves a checkpoint first) or choose another output directory"
        )
    if path.exists() and path.is_dir() and any(path.iterdir()) and not resume and not overwrite:
        raise RunDirError(f"output directory {path} exists; {choices}")
    if resume and not (path / "config.yaml").exists():
        raise RunDirError(f"--resume: {path} holds no run (no config.yaml)")
    parent = path
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise RunDirError(f"output directory {path} is not writable: {os.strerror(errno.ENOTDIR)}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise RunDirError(f"output directory {path} is not writable: {os.strerror(errno.EACCES)}")


class RunDir:
    """One folder per run: config.yaml, metrics.jsonl, samples.jsonl, checkpoints/, final/, eval/, plots/."""

    def __init__(self, path: str | Path, *, resume: bool = False, overwrite: bool = False, min_free_mb: int = 1024):
        self.path = Path(path)
        check_output_dir(self.path, resume=resume, overwrite=overwrite)
        if self.path.exists() and any(self.path.iterdir()) and not resume:
            shutil.rmtree(self.path)  # overwrite (check_output_dir refused it otherwise)
        self._check_writable(min_free_mb)
        self._lock = _hold(self.path)
        self._identity = _identity(self.path)

    def check_ours(self) -> None:
        """Raise when the folder was removed or replaced since this run made it (someone reused the path while
        this run was still stopping): nothing more of this run is written into another run's folder."""
        if _identity(self.path) != self._identity:
            raise RunDirError(f"{self.path} was removed or replaced while this run was writing to it; stopped here")

    def _check_writable(self, min_free_mb: int) -> None:
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            probe = self.path / ".write-probe"
            probe.write_text("ok")
            probe.unlink()
        except OSError as e:
            raise RunDirError(f"output directory {self.path} is not writable: {e.strerror}") from None
        free_mb = shutil.disk_usage(self.path).free / 2**20
        if free_mb < min_free_mb:
            raise RunDirError(f"only {free_mb:.0f} MiB free under {self.path}; need at least {min_free_mb} MiB")

    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def samples_path(self) -> Path:
        return self.path / "samples.jsonl"

    def write_config(self, text: str) -> None:
        atomic_write_text(self.path / "config.yaml", text)

    def append(self, path: Path, rows: list[dict]) -> None:
        """Append lines, fsynced. A metrics line gets WALL_TIME here, where every recipe writes its lines, set in the
        caller's row too, so that the trackers it goes to next get the same time (a line that has one keeps it)."""
        self.check_ours()
        if Path(path) == self.metrics_path:
            now = time.time()
            for row in rows:
                row.setdefault(WALL_TIME, now)
        with open(path, "a") as f:
            for row in rows:
                f.write(json.dumps({k: _clean(v) for k, v in row.items()}) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def truncate_after(self, step: int) -> None:
        """On resume: drop the metric and sample lines of steps after the checkpoint (they will be redone)."""
        for path in (self.metrics_path, self.samples_path):
            if path.exists():
                rows = [r for r in read_jsonl(path, skip_torn=True) if r.get("step", 0) <= step]
                atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in rows))


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def _live_holder(path: Path) -> int | None:
    """The pid of another live process holding `path`'s run lock, or that of one of its sub-folders (a main job's
    phases), else None. The lock is an flock, so a crashed holder leaves a stale file that locks nothing."""
    if fcntl is None or not path.is_dir():
        return None
    for lock in [path / LOCK_FILE, *path.glob(f"*/{LOCK_FILE}")]:
        pid = _other_holder(lock)
        if pid is not None:
            return pid
    return None


def _other_holder(lock: Path) -> int | None:
    """The pid in `lock` when another process holds it, else None (free, stale, unreadable, or this process's own
    earlier RunDir on the path, which is no conflict)."""
    try:
        with open(lock) as f:
            try:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = int(f.read().strip() or 0)
                return pid if pid != os.getpid() else None
    except (OSError, ValueError):
        pass
    return None


def _hold(path: Path):
    """Take the run lock for this process's life (the open file keeps it); None where there is no flock, or where
    this process holds it already."""
    if fcntl is None:
        return None
    f = open(path / LOCK_FILE, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        pid = _other_holder(path / LOCK_FILE)
        if pid is not None:  # another process took it since check_output_dir looked
            raise RunDirError(f"output directory {path} is in use by a running rlvr process (pid {pid})") from None
        return None
    f.truncate(0)
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f


def read_config(run_dir: str | Path):
    """A run directory's config.yaml as the typed Config it ran with (checked as --resume checks it: a key rlvr
    added since takes its default); the defaults where the folder holds none."""
    from rlvr.config import as_config
    from rlvr.yaml_io import load_yaml

    path = Path(run_dir) / "config.yaml"
    return as_config((load_yaml(path.read_text(), str(path)) if path.exists() else None) or {})


def read_jsonl(path: Path, *, skip_torn: bool = False) -> list[dict]:
    """Read a JSON-lines file; a torn last line (a crash mid-write) is dropped when skip_torn."""
    rows: list[dict] = []
    if not Path(path).exists():
        return rows
    lines = Path(path).read_text().splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if skip_torn and i == len(lines) - 1:
                break
            raise
    return rows
