"""Memory in the update: an out-of-memory in a forward or backward named by its shape and the setting that shrinks
it (`oom_report`, `MicroBatchOOM`), and the pages an update freed handed back to the OS (`returns_freed_memory`)."""

from __future__ import annotations

import contextlib
import ctypes
import functools
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

import torch


class MicroBatchOOM(RuntimeError):
    """Out of memory in one micro-batch; the message names its shape and the setting that shrinks it."""


def _is_oom(e: BaseException) -> bool:
    # torch raises torch.OutOfMemoryError on accelerators, a plain RuntimeError from the CPU allocator.
    text = str(e).lower()
    return (
        isinstance(e, (MemoryError, torch.OutOfMemoryError))
        or "out of memory" in text
        or "can't allocate memory" in text
    )


@contextlib.contextmanager
def oom_report(what: str, hint: str) -> Iterator[None]:
    """Turn an out-of-memory inside a forward/backward into MicroBatchOOM naming what ran out (its shape) and
    the setting that shrinks it; any other error passes through unchanged."""
    try:
        yield
    except (RuntimeError, MemoryError) as e:
        if not _is_oom(e):
            raise
        raise MicroBatchOOM(f"out of memory in {what}; {hint} ({type(e).__name__}: {str(e)[:200]})") from e


_P = ParamSpec("_P")
_R = TypeVar("_R")


def returns_freed_memory(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorator: after `fn`, hand the pages it freed back to the OS (glibc's malloc_trim; elsewhere nothing).

    Why: an update allocates and frees about a gigabyte of activations in tensors of ever-different sizes;
    glibc kept the freed pages, fragmented, and the process's resident size crept up step after step (peak
    3.25 GB after 12 replayed updates of the bench shape, 3.11 GB with this; the live set is ~1.75 GB).
    """

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return fn(*args, **kwargs)
        finally:
            libc = _libc()
            if libc is not None:
                libc.malloc_trim(0)

    return wrapper


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None
