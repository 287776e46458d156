"""No sandboxed process outlives the pool worker that started it.

A pool worker supervises its sandboxed runs (rlvr.verifiers.sandbox kills them at their deadline). When the worker
itself dies mid-item (killed at the pool's deadline, by the OOM killer, by an operator), its sandboxed processes
lose their supervisor and would be adopted by init, where a `time.sleep(3600)` candidate lives on. The service
therefore makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER, Linux): such orphans become its own
children, and a thread kills them (their process group, and every process of their sandbox uid) and reaps them.

An orphan is a child of this process that runs the sandbox launcher or under a sandbox uid; the service's other
children (the pool's workers, forks of this process) never match.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time

from rlvr.verifiers.sandbox import LAUNCHER, UID_HIGH, UID_LOW, processes_of_uid

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def orphans(parent: int) -> list[tuple[int, int]]:
    """(pid, uid) of the children of `parent` that are sandboxed processes."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != parent:
                continue
            uid = os.stat(f"/proc/{name}").st_uid
            with open(f"/proc/{name}/cmdline", "rb") as f:
                launched = LAUNCHER.encode() in f.read()
        except (OSError, ValueError, IndexError):
            continue
        if launched or UID_LOW <= uid < UID_HIGH:
            found.append((int(name), uid))
    return found


def kill_orphan(pid: int, uid: int) -> None:
    for kill, target in ((os.killpg, pid), (os.kill, pid)):
        try:
            kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if UID_LOW <= uid < UID_HIGH:
        for p in processes_of_uid(uid):
            try:
                os.kill(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    for _ in range(100):  # reap it: a killed child stays a zombie until waited for
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                return
        except ChildProcessError:
            return
        time.sleep(0.01)


class Reaper:
    """`with Reaper(): ...` kills and reaps orphaned sandboxed processes every `interval_s`; `killed` counts them."""

    def __init__(self, interval_s: float = 0.5):
        self.interval_s, self.killed = interval_s, 0
        self.active = become_subreaper()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rlvr-serve-reaper", daemon=True)

    def sweep(self) -> int:
        found = orphans(os.getpid())
        for pid, uid in found:
            kill_orphan(pid, uid)
        self.killed += len(found)
        return len(found)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sweep()

    def __enter__(self):
        if self.active:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self.active:
            self._thread.join(timeout=5)
            self.sweep()
