"""Verification fan-out past one machine on Ray (an optional extra: `pip install ray`), imported only when asked
for (`reward.engine: ray`, or `score_batch(..., engine="ray")`).

Same contract as the local pool (rlvr.verifiers.pool): B verdicts in input order, and one bad item costs only
itself. Each item is one Ray task running `deadline.score_one` (so the verifier's own in-process deadline applies
on the worker); the driver keeps at most `slots` tasks in flight, starts an item's clock when it submits it,
and past `timeout_s + GRACE_S` force-cancels the task (Ray kills its worker) and records `timeout`. A task
whose worker dies records `error`. Verdicts of ordinary items are the verifier's own, byte for byte.

The cluster: `ray.init(address=...)` with `address` (or $RAY_ADDRESS; "auto" joins a running cluster), or a
local Ray instance when neither is given. The verifier is shipped once per batch (`ray.put`); workers need
rlvr importable (same environment on every node, or a Ray runtime_env).
"""

from __future__ import annotations

import os
import time

from rlvr.verifiers.base import Verdict
from rlvr.verifiers.deadline import GRACE_S, score_one


def _ray():
    try:
        import ray
    except ImportError:
        raise ImportError("reward.engine 'ray' needs Ray: pip install 'ray>=2.9' (an optional extra)") from None
    return ray


def _connect(ray, address: str | None) -> None:
    if not ray.is_initialized():
        ray.init(address=address or os.environ.get("RAY_ADDRESS"), ignore_reinit_error=True, log_to_driver=False)


def _score_task(verifier, completion, problem, timeout_s):
    return score_one(verifier, completion, problem, timeout_s)


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
    inflight: dict = {}  # ref -> (index, submitted_at)
    while todo or inflight:
        while todo and len(inflight) < slots:
            i = todo.pop()
            inflight[task.remote(shipped, completions[i], problems[i], timeout_s)] = (i, time.monotonic())
        nearest = min(t for _, t in inflight.values()) + limit
        ready, _ = ray.wait(list(inflight), num_returns=1, timeout=max(0.0, nearest - time.monotonic()))
        for ref in ready:
            i, _ = inflight.pop(ref)
            results[i] = _settle(ray, ref)
        now = time.monotonic()
        for ref, (i, started) in list(inflight.items()):
            if now - started >= limit:
                ray.cancel(ref, force=True)
                inflight.pop(ref)
                results[i] = Verdict("timeout", 0.0, None, f"worker killed after {limit:g}s")
    return results  # type: ignore[return-value]


def _settle(ray, ref) -> Verdict:
    try:
        return ray.get(ref)
    except ray.exceptions.RayError as e:  # the worker died (score_one itself never raises)
        return Verdict("error", 0.0, None, f"worker died while scoring ({type(e).__name__})")
