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
import threading
from typing import Callable, TypeVar

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


def call_with_deadline(fn: Callable[[], T], timeout_s: float | None) -> T:
    """Return fn(), or raise TimedOut once `timeout_s` seconds have passed (None or <= 0: no limit)."""
    if timeout_s is None or timeout_s <= 0:
        return fn()
    target = threading.get_ident()
    lock = threading.Lock()
    state = {"done": False, "fired": False}
    stop = threading.Event()

    def watchdog() -> None:
        if stop.wait(timeout_s):
            return
        while True:
            with lock:
                if state["done"]:
                    return
                state["fired"] = True
                _raise_in(target, DeadlineExceeded)
            if stop.wait(_REARM_S):
                return

    dog = threading.Thread(target=watchdog, name="rlvr-deadline", daemon=True)
    dog.start()
    try:
        try:
            result = fn()
        finally:
            _disarm(state, lock, stop, target)
    except DeadlineExceeded:
        raise TimedOut(f"exceeded {timeout_s:g}s") from None
    if state["fired"]:
        # fn swallowed every interruption and finished late: still a timeout, so results don't depend on luck.
        raise TimedOut(f"exceeded {timeout_s:g}s")
    return result


def _disarm(state: dict, lock: threading.Lock, stop: threading.Event, target: int) -> None:
    """Stop the watchdog for good and drop an exception it scheduled but that has not been delivered.

    A scheduled exception may still land while this runs; then we simply go round again. Once `done` is
    set under the lock the watchdog schedules nothing more, so the loop ends on the next pass.
    """
    while True:
        try:
            with lock:
                state["done"] = True
                if state["fired"]:
                    _raise_in(target, None)
            stop.set()
            return
        except DeadlineExceeded:
            state["fired"] = True


# Time for a worker (a pool process, a Ray task) to report after its verifier's own deadline fired, before it is killed.
GRACE_S = 0.25


def score_one(verifier, completion, problem, timeout_s: float | None) -> Verdict:
    """One item in this process: the verifier's verdict, or timeout / error; never raises."""
    try:
        return call_with_deadline(lambda: verifier.score(completion, problem), timeout_s)
    except TimedOut as e:
        return Verdict("timeout", 0.0, None, f"verification {e}")
    except Exception as e:
        return Verdict("error", 0.0, None, f"{type(e).__name__}: {e}"[:300])
