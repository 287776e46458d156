"""Running untrusted code: a fresh directory, rlimits, a fresh uid, no network, a hard wall-clock deadline.

What one run gets (see docs/sandbox.md for what was measured on which machine):
- a fresh temporary directory as cwd (removed afterwards) holding the given files;
- its own process group; rlimits on CPU seconds, address space, file size, open files, processes;
- when started as root: a random unprivileged uid/gid used by this run alone, so RLIMIT_NPROC binds
  (it does not bind root), the program cannot signal or ptrace anything outside the run, and every
  process the run left behind can be found by uid and killed, even ones that left the process group;
- where the kernel allows it: a new network namespace (only a down loopback: no network at all) and a
  private mount namespace with fresh tmpfs over /tmp, /var/tmp, /dev/shm and /run/lock;
- a scrubbed environment; stdin from the caller; stdout/stderr captured up to a cap (the run is killed
  when it writes past the cap, so 10 GB of output costs milliseconds, not minutes).

What isolation this machine allows is probed once (`isolation()`); a run never silently gets less
than the probe reported: the launcher exits 125 when a requested step fails.
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_sandbox_launcher.py")
# Interpreters the sandboxed uid may be able to run, in order of preference; the first one that runs and
# imports its standard library as that uid is used (a venv under /root is not reachable by other uids).
PYTHON_CANDIDATES = (os.path.realpath(sys.executable), "/usr/bin/python3", "/usr/local/bin/python3")
# argv[0] meaning "run argv[1] as a Python script (stdlib only, its own dir on sys.path) in the launcher's
# interpreter", which is isolation()["python"]: one interpreter start per run instead of two.
IN_PROCESS = "<python>"
# Sandbox uids are drawn at random from this range, far above any real account, so two concurrent runs
# (even from two processes that know nothing of each other) practically never share one.
UID_LOW, UID_HIGH = 1 << 20, 1 << 30
SAFE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
    "PYTHONIOENCODING": "utf-8",
}


@dataclass(frozen=True)
class Limits:
    """Per-run limits. memory_mb is address space per process; processes counts threads too."""

    cpu_s: int = 10
    wall_s: float = 10.0
    memory_mb: int = 1024
    file_mb: int = 16
    open_files: int = 64
    processes: int = 16
    output_bytes: int = 1 << 20
    tmpfs_mb: int = 32

    def rlimits(self) -> dict:
        mb = 1 << 20
        return {
            "RLIMIT_CPU": self.cpu_s,
            "RLIMIT_AS": self.memory_mb * mb,
            "RLIMIT_FSIZE": self.file_mb * mb,
            "RLIMIT_NOFILE": self.open_files,
            "RLIMIT_NPROC": self.processes,
            "RLIMIT_CORE": 0,
        }


@dataclass
class SandboxResult:
    """returncode: the program's (negative = killed by that signal; 125 = sandbox setup failed);
    timed_out: the wall-clock deadline passed; killed_by: None, "deadline", "output_limit" or
    "signal:<NAME>"; isolation: what this run actually had."""

    returncode: int
    stdout: bytes
    stderr: bytes
    timed_out: bool
    killed_by: str | None
    wall_s: float
    isolation: dict = field(default_factory=dict)
    output_truncated: bool = False


_probe_lock = threading.Lock()
_probed: dict | None = None


def isolation() -> dict:
    """What this machine lets the sandbox do, probed once:
    {"uid": bool, "netns": bool, "mountns": bool, "python": path of the interpreter sandboxed code gets}.

    Tries the strongest setting first and steps down, so a container without CAP_SYS_ADMIN still runs
    code (with the weaker isolation stated here and in docs/sandbox.md). Raises RuntimeError when no
    setting can run Python at all.
    """
    global _probed
    with _probe_lock:
        if _probed is None:
            _probed = _probe()
        return dict(_probed)


def _probe() -> dict:
    is_root = os.geteuid() == 0
    for netns, mountns in ((True, True), (True, False), (False, False)):
        for python in dict.fromkeys(PYTHON_CANDIDATES):
            opts = {"uid": is_root, "netns": netns, "mountns": mountns, "python": python}
            if os.access(python, os.X_OK) and _probe_once(opts):
                return opts
    raise RuntimeError("sandbox: no isolation setting could run Python here; see docs/sandbox.md")


def _probe_once(opts: dict) -> bool:
    with tempfile.TemporaryDirectory(prefix="rlvr-probe-") as d:
        uid = secrets.randbelow(UID_HIGH - UID_LOW) + UID_LOW if opts["uid"] else None
        if uid is not None:
            os.chown(d, uid, uid)
        argv = [opts["python"], "-I", "-S", "-c", "import json, math, hashlib, re, collections"]
        cfg = _config(d, uid, opts, Limits())
        proc = subprocess.run(
            [sys.executable, "-I", "-S", LAUNCHER, json.dumps(cfg), *argv],
            capture_output=True,
            timeout=30,
            env=SAFE_ENV,
        )
        return proc.returncode == 0


def _config(workdir: str, uid: int | None, opts: dict, limits: Limits) -> dict:
    return {
        "workdir": workdir,
        "uid": uid,
        "netns": opts["netns"],
        "mountns": opts["mountns"],
        "tmpfs_mb": limits.tmpfs_mb,
        "rlimits": limits.rlimits(),
        "env": SAFE_ENV,
    }


def _write_files(workdir: str, files: dict, uid: int | None) -> None:
    """Write the given files (relative paths only) into workdir, owned by the run's uid."""
    for name, content in (files or {}).items():
        path = os.path.normpath(os.path.join(workdir, name))
        if not path.startswith(workdir + os.sep):
            raise ValueError(f"sandbox file name escapes the work dir: {name!r}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content.encode() if isinstance(content, str) else content)
    if uid is not None:
        for root, dirs, names in os.walk(workdir):
            for n in [root] + [os.path.join(root, x) for x in dirs + names]:
                os.chown(n, uid, uid)


def run_sandboxed(
    program,
    files: dict | None = None,
    stdin: bytes | str = b"",
    limits: Limits = Limits(),
    pass_fds: tuple = (),
    close_passed: bool = False,
    stop: threading.Event | None = None,
) -> SandboxResult:
    """Run `program` (an argv list, or Python source as a str run as main.py) in a fresh sandbox.

    Python source runs under `isolation()["python"]` in isolated mode without site: the standard
    library only. An argv of [IN_PROCESS, script, args...] runs a script the same way.
    files: {relative path: str | bytes} written into the work dir first. pass_fds: extra descriptors the
    program inherits (same numbers); with close_passed they are closed here once the program started,
    so the program holds the only copies (they are closed on failure too). `stop`, when set, ends the run
    early (killed_by "stopped"). Blocks until the program and everything it started are gone.
    """
    to_close = list(pass_fds) if close_passed else []
    opts = isolation()
    uid = secrets.randbelow(UID_HIGH - UID_LOW) + UID_LOW if opts["uid"] else None
    files = dict(files or {})
    if isinstance(program, str):
        files["main.py"] = program
        program = [IN_PROCESS, "main.py"]
    workdir = tempfile.mkdtemp(prefix="rlvr-sbx-")
    try:
        os.chmod(workdir, 0o700)
        _write_files(workdir, files, uid)
        argv = [opts["python"], "-I", "-S", LAUNCHER, json.dumps(_config(workdir, uid, opts, limits)), *program]
        return _supervise(argv, stdin, limits, uid, opts, pass_fds, to_close, stop)
    finally:
        _close_all(to_close)
        shutil.rmtree(workdir, ignore_errors=True)


def _close_all(fds: list) -> None:
    while fds:
        try:
            os.close(fds.pop())
        except OSError:
            pass


def _supervise(argv, stdin, limits, uid, opts, pass_fds, to_close, stop) -> SandboxResult:
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        process_group=0,
        pass_fds=pass_fds,
        env=SAFE_ENV,
        cwd="/",
    )
    _close_all(to_close)
    feeder = threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True)
    feeder.start()
    out, err, killed_by, truncated = _collect(proc, start + limits.wall_s, limits.output_bytes, stop)
    if killed_by is None:
        try:  # the program may close its pipes and keep running
            _wait(proc, start + limits.wall_s, stop)
        except subprocess.TimeoutExpired:
            killed_by = "stopped" if stop is not None and stop.is_set() else "deadline"
    if killed_by:
        _kill_run(proc.pid, uid)
    returncode = proc.wait()
    _kill_run(proc.pid, uid)  # whatever the program left behind, even outside its process group
    feeder.join(timeout=1)
    if killed_by is None and returncode < 0:
        try:
            killed_by = f"signal:{signal.Signals(-returncode).name}"
        except ValueError:
            killed_by = f"signal:{-returncode}"
    return SandboxResult(
        returncode, out, err, killed_by == "deadline", killed_by, time.monotonic() - start, dict(opts), truncated
    )


def _wait(proc, deadline: float, stop: threading.Event | None) -> None:
    """Wait for the program to end; raises TimeoutExpired at the deadline or when `stop` is set."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or (stop is not None and stop.is_set()):
            raise subprocess.TimeoutExpired(proc.args, 0)
        try:
            proc.wait(timeout=min(left, 0.02 if stop is not None else left))
            return
        except subprocess.TimeoutExpired:
            continue


def _feed(pipe, data) -> None:
    try:
        pipe.write(data.encode() if isinstance(data, str) else data)
    except (BrokenPipeError, OSError):
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def _collect(proc, deadline: float, cap: int, stop: threading.Event | None):
    """Read stdout and stderr until both close, the deadline passes or the output passes the cap."""
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    bufs = {out_fd: bytearray(), err_fd: bytearray()}
    sel = selectors.DefaultSelector()
    for pipe in (proc.stdout, proc.stderr):
        sel.register(pipe, selectors.EVENT_READ)
    killed_by, truncated = None, False
    while sel.get_map():
        left = deadline - time.monotonic()
        if left <= 0:
            killed_by = "deadline"
            break
        if stop is not None and stop.is_set():
            killed_by = "stopped"
            break
        for key, _ in sel.select(timeout=min(left, 0.5 if stop is None else 0.02)):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            bufs[key.fd] += chunk
            if len(bufs[key.fd]) > cap:
                killed_by, truncated = "output_limit", True
        if killed_by:
            break
    sel.close()
    for pipe in (proc.stdout, proc.stderr):
        pipe.close()
    return bytes(bufs[out_fd][:cap]), bytes(bufs[err_fd][:cap]), killed_by, truncated


def _kill_run(pid: int, uid: int | None) -> None:
    """SIGKILL the run's process group and, with a private uid, every process of that uid, until none is left."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if uid is not None:
        kill_uid(uid)


def kill_uid(uid: int) -> int:
    """SIGKILL every process of a sandbox uid, again until none is left (a fork bomb forks between the scan and the
    kill); returns how many were killed. Processes that left the run's tree are found by their uid."""
    killed = 0
    for _ in range(100):
        left = processes_of_uid(uid)
        if not left:
            break
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)
    return killed


def descendants(pid: int) -> list[tuple[int, int]]:
    """(pid, uid) of every live descendant of `pid` (one scan of /proc)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(name))
            except (OSError, ValueError, IndexError):
                continue
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            try:
                out.append((child, os.stat(f"/proc/{child}").st_uid))
            except OSError:
                continue
            todo.append(child)
    return out


def kill_tree(pid: int) -> None:
    """SIGKILL a process and everything it started, sandboxed runs included (their process groups and every
    process of their uid): a supervisor killed mid-run (a pool worker past its deadline) leaves nothing running."""
    tree = descendants(pid)
    for p in [pid] + [p for p, _ in tree]:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for p, uid in tree:
        _kill_run(p, uid if UID_LOW <= uid < UID_HIGH else None)


def processes_of_uid(uid: int) -> list[int]:
    """Pids of live processes whose uid is `uid` (scans /proc; zombies excluded).

    A sandboxed process cannot change its uid (real, effective and saved are all `uid`), so the owner
    of /proc/PID, one stat call, is enough; only matches are read further to skip zombies.
    """
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            with open(f"/proc/{name}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            found.append(int(name))
    return found


def sandbox_processes() -> list[int]:
    """Pids of live processes running under any sandbox uid (for tests: none should outlive a run)."""
    return [p for uid in _live_uids() if UID_LOW <= uid < UID_HIGH for p in processes_of_uid(uid)]


def _live_uids() -> set[int]:
    uids = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                uids.add(os.stat(f"/proc/{name}").st_uid)
            except OSError:
                pass
    return uids
