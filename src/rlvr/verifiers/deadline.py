"""A deadline for a call, enforced from a watchdog thread, so it works off the main thread too.

math-verify's own timeout uses `signal.alarm`, which only works in the main thread of the main
interpreter (a trainer's worker thread or a data-loader thread gets a ValueError, or no timeout at all).
Here a watchdog thread raises `DeadlineExceeded` *inside the calling thread* through
`PyThreadState_SetAsyncExc`. That interrupts any Python-level work (sympy is pure Python), in any
thread, in any process. It cannot interrupt one long C call (a single giant big-integer power); the math
verifier refuses those before they start (see `guard.py`) and the process pool (`pool.py`) kills a
worker that still overruns, which is the only truly hard limit.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from rlvr.verifiers.base import Verdict

T = TypeVar("T")

# How often the watchdog re-raises if library code swallowed the first exception (a bare `except:`).
_REARM_S = 0.2


class DeadlineExceeded(BaseException):
    """Raised inside the timed call. A BaseException, so library `except Exception:` blocks don't eat it."""


class TimedOut(Exception):
    """The call did not finish within its deadline."""


def _raise_in(thread_id: int, exc: type[BaseException] | None) -> None:
    """Schedule `exc` in thread `thread_id` (None clears a scheduled one that has not fired yet)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else None)


class _Deadline:
    """One armed call: the thread to interrupt, when, and whether it was interrupted."""

    __slots__ = ("target", "at", "fired")

    def __init__(self, target: int, at: float):
        self.target, self.at, self.fired = target, at, False


class _Watchdog:
    """One daemon thread per process fires every armed deadline.

    Why one and not a thread per call: starting a thread per call costs ~0.1 ms, and in CPython 3.11 a thread being
    started carries its creator's id until it runs, so an interruption meant for the creator (a nested call's outer
    deadline firing just then) could land in the new thread instead: the creator ran on unbounded and the new
    watchdog died. With one long-lived thread, no thread is started while a deadline is armed.

    Why bare locks: an interruption can land in the interrupted thread at any Python-level step, so the code it
    runs here (arm, disarm) touches only primitives whose acquire and release are single C calls. A
    `threading.Condition` or `Event` runs Python code between taking and releasing its lock, and an interruption
    landing there left the lock held for good: the next call hung.
    """

    def __init__(self):
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # the thread and its locks do not survive a fork

    def _reset(self) -> None:
        self._lock = threading.Lock()  # guards _armed
        self._wake = threading.Lock()  # a binary semaphore: released by arm() to wake the thread early
        self._wake.acquire()
        self._armed: set[_Deadline] = set()
        self._thread: threading.Thread | None = None

    def arm(self, d: _Deadline) -> None:
        with self._lock:  # under the lock, so two threads arming their first deadlines start one watchdog
            if self._thread is None:  # the process's first deadline: none is armed, so nothing interrupts this
                self._thread = threading.Thread(target=self._run, name="rlvr-deadline", daemon=True)
                self._thread.start()
            self._armed.add(d)
        try:
            self._wake.release()
        except RuntimeError:  # already released, not yet taken: the thread will wake anyway
            pass

    def disarm(self, d: _Deadline) -> bool:
        """Stop `d` for good and drop an interruption it scheduled that has not landed yet; whether it fired.
        Idempotent, so a caller can simply call it again when an interruption lands on the way in."""
        with self._lock:
            self._armed.discard(d)
            if d.fired:
                _raise_in(d.target, None)
        return d.fired

    def _run(self) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                for d in self._armed:
                    if d.at <= now:
                        d.fired, d.at = True, now + _REARM_S
                        _raise_in(d.target, DeadlineExceeded)
                nearest = min((d.at for d in self._armed), default=None)
            self._wake.acquire(timeout=-1 if nearest is None else max(0.0, nearest - time.monotonic()))


_WATCHDOG = _Watchdog()


def _disarm(d: _Deadline) -> bool:
    """_Watchdog.disarm, retried when a scheduled interruption lands on the way in (before its own `with`): a
    deadline left armed would keep raising into whatever code the thread runs next."""
    while True:
        try:
            return _WATCHDOG.disarm(d)
        except DeadlineExceeded:
            d.fired = True


def call_with_deadline(fn: Callable[[], T], timeout_s: float | None) -> T:
    """Return fn(), or raise TimedOut once `timeout_s` seconds have passed (None or <= 0: no limit)."""
    if timeout_s is None or timeout_s <= 0:
        return fn()
    d = _Deadline(threading.get_ident(), time.monotonic() + timeout_s)
    try:
        try:
            _WATCHDOG.arm(d)
            result = fn()
        finally:
            _disarm(d)
    except DeadlineExceeded:
        _disarm(d)  # it may have landed at the entry of the disarm in `finally`, before that could finish
        raise TimedOut(f"exceeded {timeout_s:g}s") from None
    if d.fired:
        # fn swallowed every interruption and finished late: still a timeout, so results don't depend on luck.
        raise TimedOut(f"exceeded {timeout_s:g}s")
    return result


# Time for a worker (a pool process, a Ray task) to report after its verifier's own deadline fired, before it is killed.
GRACE_S = 0.25


def warm_up(verifier) -> None:
    """Pay a verifier's first-use costs (its `warm_up`, if it has one) outside any deadline.

    The math verifier's lazy sympy imports took ~0.7 s alone and over 2 s on a busy machine (two test workers
    beside other processes): paid inside the first item's deadline, they turned a correct answer into `timeout`.
    The verifier keeps a per-process flag, so calling this per item costs nothing after the first."""
    warm = getattr(verifier, "warm_up", None)
    if callable(warm):
        warm()


def score_one(verifier, completion, problem, timeout_s: float | None) -> Verdict:
    """One item in this process: the verifier's verdict, or timeout / error; never raises."""
    warm_up(verifier)  # before the clock starts
    try:
        return call_with_deadline(lambda: verifier.score(completion, problem), timeout_s)
    except TimedOut as e:
        return Verdict("timeout", 0.0, None, f"verification {e}")
    except Exception as e:
        return Verdict("error", 0.0, None, f"{type(e).__name__}: {e}"[:300])
