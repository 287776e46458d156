"""Batch scoring in worker processes with a per-item deadline: one bad item never costs the run.

Each worker is a process fed one item at a time over its own pipe. The supervisor (this process)
knows which item each worker holds and when it started it:
- an item past its deadline gets `timeout`, and its worker is killed (SIGKILL, so even a C-level
  stall ends) and replaced;
- a worker that dies mid-item (segfault, `os._exit`, out of memory) gives that item `error`, and is
  replaced;
- every other item is scored normally. A batch therefore finishes within about
  `timeout_s * waves` (waves = ceil(pathological items / workers)) plus the ordinary work.

`workers=0` scores in this process, still under the deadline of deadline.py (Python-level work is
interrupted; a C-level stall can only be cut by a process pool).

Workers start with `fork` where the platform has it (cheap: the verifier is inherited, nothing is
pickled but the items); elsewhere with `spawn`, where the verifier must be picklable.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from multiprocessing.connection import wait

from rlvr.verifiers.base import Verdict
from rlvr.verifiers.deadline import GRACE_S, score_one, warm_up


def _die_with_parent(parent: int) -> None:
    """SIGKILL this worker when the thread that started it dies (Linux prctl PR_SET_PDEATHSIG): a supervisor killed
    outright (SIGKILL, OOM) leaves no worker behind, even one whose pipe a sibling fork still holds open."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the prctl took
        os._exit(1)


def _worker_loop(verifier, conn, timeout_s, parent: int | None = None) -> None:
    """Receive (index, completion, problem), send back (index, Verdict); None or a closed pipe ends it."""
    if parent is not None:
        _die_with_parent(parent)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        index, completion, problem = msg
        conn.send((index, score_one(verifier, completion, problem, timeout_s)))


class _Slot:
    """One worker process, its pipe, and the item it holds (index, started_at) or None."""

    def __init__(self, ctx, verifier, timeout_s):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_loop, args=(verifier, child, timeout_s, os.getpid()), daemon=True)
        self.proc.start()
        child.close()
        self.item: tuple[int, float] | None = None

    def kill(self) -> None:
        if self.proc.is_alive():
            from rlvr.verifiers.sandbox import kill_tree  # the worker's sandboxed runs die with it

            kill_tree(self.proc.pid)
        self.proc.join(timeout=5)
        self.conn.close()


class VerifierPool:
    """Reusable pool: `with VerifierPool(v, workers=2) as pool: verdicts = pool.map(completions, problems)`."""

    def __init__(self, verifier, workers: int = 2, timeout_s: float = 5.0, start_method: str | None = None):
        if workers < 1:
            raise ValueError(f"workers={workers}; a pool needs at least 1 (use score_batch with workers=0)")
        self.verifier, self.workers, self.timeout_s = verifier, workers, timeout_s
        methods = mp.get_all_start_methods()
        self.ctx = mp.get_context(start_method or ("fork" if "fork" in methods else "spawn"))
        if self.ctx.get_start_method() == "fork":
            warm_up(verifier)  # once here, inherited by every worker (and every replacement) for free
        self.slots = [self._spawn() for _ in range(workers)]
        self.restarts = 0

    def _spawn(self) -> _Slot:
        return _Slot(self.ctx, self.verifier, self.timeout_s)

    def map(self, completions: list, problems: list) -> list[Verdict]:
        """Verdicts in input order; len(completions) must equal len(problems)."""
        if len(completions) != len(problems):
            raise ValueError(f"{len(completions)} completions but {len(problems)} problems")
        results: list[Verdict | None] = [None] * len(completions)
        todo = list(range(len(completions)))[::-1]
        while todo or any(s.item for s in self.slots):
            for k, slot in enumerate(self.slots):
                if slot.item is None and todo:
                    i = todo.pop()
                    self._start(k, i, completions[i], problems[i], results)
            self._collect(results)
        return results  # type: ignore[return-value]

    def _start(self, k: int, i: int, completion, problem, results: list) -> None:
        """Hand item i to worker k; an idle worker that died since the last batch (a kept pool) is replaced and the
        item, which never started, goes to the fresh one; a second failure is the item's `error`."""
        for attempt in range(2):
            try:
                self.slots[k].conn.send((i, completion, problem))
                self.slots[k].item = (i, time.monotonic())
                return
            except (OSError, ValueError) as e:
                self._replace(k)
                if attempt:
                    results[i] = Verdict("error", 0.0, None, f"could not send item to worker: {e}")

    def _collect(self, results: list) -> None:
        """Wait for the next finished item or the nearest deadline, and settle what is due."""
        busy = [s for s in self.slots if s.item]
        if not busy:
            return
        limit = self.timeout_s + GRACE_S
        nearest = min(s.item[1] for s in busy if s.item is not None) + limit
        ready = wait([s.conn for s in busy], timeout=max(0.0, nearest - time.monotonic()))
        for k, slot in enumerate(self.slots):
            if slot.item is None:
                continue
            i, started = slot.item
            if slot.conn in ready:
                try:
                    index, verdict = slot.conn.recv()
                    results[index], slot.item = verdict, None
                    continue
                except (EOFError, OSError):
                    slot.proc.join(timeout=1)  # reap it, so the exit code is known
                    code = slot.proc.exitcode
                    results[i] = Verdict("error", 0.0, None, f"worker died while scoring (exit code {code})")
                    self._replace(k)
            elif time.monotonic() - started >= limit:
                results[i] = Verdict("timeout", 0.0, None, f"worker killed after {limit:g}s")
                self._replace(k)

    def _replace(self, k: int) -> None:
        self.slots[k].kill()
        self.slots[k] = self._spawn()
        self.restarts += 1

    def close(self) -> None:
        for slot in self.slots:
            try:
                slot.conn.send(None)
            except (OSError, ValueError):
                pass
        for slot in self.slots:
            slot.proc.join(timeout=1)
            slot.kill()
        self.slots = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


ENGINES = ("local", "ray")


def score_batch(
    verifier, completions: list, problems: list, workers: int = 2, timeout_s: float = 5.0, engine: str = "local"
) -> list[Verdict]:
    """Score a batch: in a pool of `workers` processes, or in this process when workers=0; with engine "ray"
    (and workers > 0) as tasks on a Ray cluster instead of local processes (rlvr.verifiers.ray_pool).

    Shapes: completions and problems are lists of equal length B; returns B Verdicts in order.
    """
    if len(completions) != len(problems):
        raise ValueError(f"{len(completions)} completions but {len(problems)} problems")
    if workers <= 0 or len(completions) == 0:
        return [score_one(verifier, c, p, timeout_s) for c, p in zip(completions, problems)]
    if engine == "ray":
        from rlvr.verifiers.ray_pool import score_batch_ray  # lazy: Ray is an optional extra

        return score_batch_ray(verifier, completions, problems, timeout_s)
    if engine != "local":
        raise ValueError(f"unknown verification engine {engine!r}; choose from {', '.join(ENGINES)}")
    with VerifierPool(verifier, workers=min(workers, len(completions)), timeout_s=timeout_s) as pool:
        return pool.map(completions, problems)
