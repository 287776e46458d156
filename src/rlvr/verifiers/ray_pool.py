"""Verification fan-out past one machine on Ray (an optional extra: `pip install ray`), imported only when asked
for (`reward.engine: ray`, or `score_batch(..., engine="ray")`).

Same contract as the local pool (rlvr.verifiers.pool): B verdicts in input order, and one bad item costs only
itself. Each item is one Ray task, a streaming generator: it yields once when a worker starts it, then the verdict
of `deadline.score_one` (so the verifier's own in-process deadline applies on the worker). The driver keeps at
most `slots` tasks in flight and starts an item's clock at that first yield, not at submission: queueing and a
fresh worker's start-up (seconds, after a worker was killed) are not the item's time. Measured with Ray 2.60 on
2 cores, a clock started at submission timed out every item of the code verifier's hostile suite at
`timeout_s=1`: each killed worker's replacement started too slowly for the next item.

Past its deadline an item is ended in two steps, so that nothing it started keeps running:
1. on the worker, at `timeout_s + GRACE_S` into the item, a timer thread SIGKILLs every sandboxed run the item
   started (rlvr.verifiers.sandbox; found as descendants running under a sandbox uid, then every process of
   that uid), and the item reports `timeout`. Ray kills only a worker's direct children: a forked bomb's
   processes outlived a force-cancelled worker, and the cluster, when only step 2 existed;
2. on the driver, `REAP_S` later, the task is force-cancelled (`ray.cancel(force=True)`: Ray kills the worker),
   for a verifier stuck where no thread of its worker runs (a C call holding the GIL), and recorded `timeout`.
When the item ends in time, the sandboxed runs it left are killed too: an in-process deadline that interrupts the
sandbox's supervisor leaves its run going. A task whose worker dies records `error`, as does an item that no
worker started within `START_LIMIT_S` (a cluster without a free CPU). Verdicts of ordinary items are the
verifier's own, byte for byte.

The cluster: `ray.init(address=...)` with `address` (or $RAY_ADDRESS; "auto" joins a running cluster), or a
local Ray instance when neither is given. The verifier is shipped once per batch (`ray.put`); workers need
rlvr importable (same environment on every node, or a Ray runtime_env).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

from rlvr.verifiers.base import Verdict
from rlvr.verifiers.deadline import GRACE_S, score_one, warm_up

# After the worker's own timer killed an item's sandboxed runs: time for it to report before the driver
# force-cancels the task (the worker's runs must be gone before Ray kills the worker, or they are orphaned).
REAP_S = 0.5
# An item that no worker has started after this long is given up (`error`): the cluster has no free CPU for it,
# or its workers cannot start. Waiting for a busy cluster is normal; waiting forever is not.
START_LIMIT_S = 120.0


def _ray():
    try:
        import ray
    except ImportError:
        raise ImportError(
            "reward.engine 'ray' needs Ray: pip install ray (an optional extra; tested with 2.60.0)"
        ) from None
    return ray


def _connect(ray, address: str | None) -> None:
    if not ray.is_initialized():
        ray.init(address=address or os.environ.get("RAY_ADDRESS"), ignore_reinit_error=True, log_to_driver=False)


def reap_sandboxes() -> int:
    """SIGKILL every sandboxed run this process started that is still alive; returns how many processes were
    killed. A run is found as a descendant under a sandbox uid, and ended as the sandbox ends its own: every
    process of that uid, including those that left the process tree."""
    from rlvr.verifiers.sandbox import UID_HIGH, UID_LOW, descendants, kill_uid

    return sum(kill_uid(uid) for uid in {u for _, u in descendants(os.getpid()) if UID_LOW <= u < UID_HIGH})


class _Reaper:
    """On the worker, for one item: kills its sandboxed runs `after` seconds in (`fired`), or when it ends."""

    def __init__(self, after: float):
        self._lock = threading.Lock()
        self._done = self.fired = False
        # Started before score_one arms its deadline: a thread being started while a deadline is armed could
        # receive that deadline's interruption (see deadline._Watchdog).
        self._timer = threading.Timer(after, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:  # never after stop(): the worker may be running the next item by then
            if not self._done:
                self.fired = True
                reap_sandboxes()

    def stop(self) -> bool:
        self._timer.cancel()
        with self._lock:
            self._done = True
        reap_sandboxes()
        return self.fired


def _score_task(verifier, completion, problem, timeout_s):
    """A streaming Ray task: yields None when a worker has started it and warmed the verifier up (the driver's
    clock starts there), then the Verdict."""
    warm_up(verifier)  # before the driver's clock starts: once per worker process (the verifier keeps the flag)
    yield None
    reaper = _Reaper(timeout_s + GRACE_S)
    try:
        verdict = score_one(verifier, completion, problem, timeout_s)
    finally:
        fired = reaper.stop()
    if fired:
        verdict = Verdict("timeout", 0.0, None, f"sandboxed runs killed after {timeout_s + GRACE_S:g}s")
    yield verdict


@dataclass
class _Item:
    index: int
    submitted: float
    started: float | None = None  # when the task's first yield arrived

    def due(self, limit: float) -> float:
        if self.started is None:
            return self.submitted + START_LIMIT_S
        return self.started + limit + REAP_S


def score_batch_ray(
    verifier,
    completions: list,
    problems: list,
    timeout_s: float = 5.0,
    slots: int | None = None,
    address: str | None = None,
) -> list[Verdict]:
    """B verdicts in order, scored as Ray tasks; `slots` in flight at once (default: the cluster's CPUs)."""
    if len(completions) != len(problems):
        raise ValueError(f"{len(completions)} completions but {len(problems)} problems")
    if not completions:
        return []
    ray = _ray()
    _connect(ray, address)
    slots = slots or max(1, int(ray.cluster_resources().get("CPU", 1)))
    task = ray.remote(num_cpus=1, max_retries=0)(_score_task)
    shipped = ray.put(verifier)
    limit = timeout_s + GRACE_S
    results: list[Verdict | None] = [None] * len(completions)
    todo = list(range(len(completions)))[::-1]
    inflight: dict = {}  # ObjectRefGenerator -> _Item
    while todo or inflight:
        while todo and len(inflight) < slots:
            i = todo.pop()
            inflight[task.remote(shipped, completions[i], problems[i], timeout_s)] = _Item(i, time.monotonic())
        nearest = min(item.due(limit) for item in inflight.values())
        ready, _ = ray.wait(list(inflight), num_returns=1, timeout=max(0.0, nearest - time.monotonic()))
        for gen in ready:
            _advance(ray, gen, inflight, results)
        _expire(ray, inflight, results, limit)
    return results  # type: ignore[return-value]


def _advance(ray, gen, inflight: dict, results: list) -> None:
    """Take the task's next yield: its start (the clock starts now), or its verdict (the item is done)."""
    item = inflight[gen]
    try:
        value = ray.get(next(gen))
    except (StopIteration, ray.exceptions.RayError) as e:  # score_one never raises: the worker or Ray failed
        del inflight[gen]
        results[item.index] = Verdict("error", 0.0, None, _failure(ray, e))
        return
    if item.started is None:
        item.started = time.monotonic()
        return
    del inflight[gen]
    results[item.index] = value


def _failure(ray, e: BaseException) -> str:
    """One line for a task that failed: its worker died, or Ray could not run it (say, the verifier's class does
    not unpickle on the worker: rlvr, or the user's module, is not importable there)."""
    if isinstance(e, ray.exceptions.WorkerCrashedError | StopIteration):
        return f"worker died while scoring ({type(e).__name__})"
    cause = getattr(e, "cause", None) or e
    first = next((line for line in str(cause).splitlines() if line.strip()), "")
    return f"Ray task failed: {type(cause).__name__}: {first}"[:300]


def _expire(ray, inflight: dict, results: list, limit: float) -> None:
    """Force-cancel the tasks past their deadline (Ray kills the worker) and record their verdicts."""
    now = time.monotonic()
    for gen, item in list(inflight.items()):
        if now < item.due(limit):
            continue
        ray.cancel(gen, force=True)
        del inflight[gen]
        if item.started is None:
            detail = f"no worker started it within {START_LIMIT_S:g}s (no free CPU in the Ray cluster?)"
            results[item.index] = Verdict("error", 0.0, None, detail)
        else:
            results[item.index] = Verdict("timeout", 0.0, None, f"worker killed after {limit + REAP_S:g}s")
