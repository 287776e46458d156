"""An environment's step after a policy turn, as the episode loop takes it: under a deadline, with a fault costing its
episode and never the run; a round's steps side by side on threads, or in one call where the environments' class
grades a batch (`step_batch`, an optional part of the protocol).

Each returns (outcome, seconds): the environment's Step, or the Fault that stood in for it.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from rlvr.verifiers.deadline import TimedOut, call_with_deadline


@dataclass(frozen=True)
class Fault:
    """What a step that raised ("error") or ran past its deadline ("timeout") leaves instead of a Step."""

    status: str
    detail: str


def take_step(env, text: str, step_timeout_s: float = 0.0):
    """The environment's step after a turn: (its Step, or the Fault that ended it, the seconds it took).
    Python-level work is interrupted at the deadline (0: none; rlvr.verifiers.deadline works in any thread); a step
    blocked in one C call (a sleep, a socket read) is waited out and then marked timeout. The python tool has its own
    hard deadline (a killed sandbox process)."""
    t0 = time.perf_counter()
    try:
        outcome = call_with_deadline(lambda: env.step(text), step_timeout_s)
    except TimedOut as e:  # a hung environment (or tool) costs its episode, never the run
        outcome = Fault("timeout", f"environment step {e}")
    except Exception as e:  # a faulty environment costs its episode, never the run
        outcome = Fault("error", f"{type(e).__name__}: {e}"[:300])
    return outcome, time.perf_counter() - t0


def take_steps(envs: list, texts: list[str], step_timeout_s: float, workers: int) -> list:
    """take_step for each (environment, turn), on up to `workers` threads: a round waits for its slowest step, not
    for the sum of them (a python tool call is a sandboxed process, a remote environment a request: both wait
    outside the GIL). Only the steps run in threads; splicing the answers (the tokenizer) stays on the caller's.
    Environments of one class that has `step_batch(envs, turns)` (an optional part of the protocol: a grader that
    scores a batch faster than one answer at a time) take the round in one call first; an episode it leaves None
    (a turn that calls a tool, say) is then stepped on its own, as without it."""
    outcomes = _batched_steps(envs, texts, step_timeout_s)
    rest = [i for i, outcome in enumerate(outcomes) if outcome is None]
    for i, outcome in zip(
        rest, _one_by_one([envs[i] for i in rest], [texts[i] for i in rest], step_timeout_s, workers)
    ):
        outcomes[i] = outcome
    return outcomes


def _one_by_one(envs: list, texts: list[str], step_timeout_s: float, workers: int) -> list:
    if workers <= 1 or len(envs) <= 1:
        return [take_step(env, text, step_timeout_s) for env, text in zip(envs, texts)]
    with ThreadPoolExecutor(max_workers=min(workers, len(envs)), thread_name_prefix="rlvr-env") as pool:
        return list(pool.map(lambda env, text: take_step(env, text, step_timeout_s), envs, texts))


def _batched_steps(envs: list, texts: list[str], step_timeout_s: float) -> list:
    """The round through the environments' shared `step_batch`, under one step's deadline, each episode it stepped
    charged an equal share of the wall time; None for an episode it left to be stepped alone, and for every episode
    where they have none (or differ in class), or where the batch raised or ran past the deadline: step_batch changes
    nothing before it returns, so the round is then taken one step at a time and only a faulty episode pays for its
    fault."""
    kind = type(envs[0]) if envs else None
    step_batch = getattr(kind, "step_batch", None)
    if step_batch is None or len(envs) < 2 or any(type(env) is not kind for env in envs):
        return [None] * len(envs)
    t0 = time.perf_counter()
    try:
        steps = call_with_deadline(lambda: step_batch(envs, texts), step_timeout_s)
    except Exception:  # TimedOut included: one step at a time finds the episode at fault
        return [None] * len(envs)
    share = (time.perf_counter() - t0) / max(sum(step is not None for step in steps), 1)
    return [None if step is None else (step, share) for step in steps]


def graded_together(envs: list, turns: list[str], rows: list[int]) -> dict[int, tuple]:
    """{row: (verdict, total)} for the answers `turns[row]` of `envs[row]` (each has `.reward` and `.problem`), graded
    by one call of each reward they share: a reward's worker pool starts once a round instead of once an answer."""
    by_reward: dict[int, list[int]] = {}
    for i in rows:
        by_reward.setdefault(id(envs[i].reward), []).append(i)
    graded: dict[int, tuple] = {}
    for same in by_reward.values():
        result = envs[same[0]].reward([turns[i] for i in same], [envs[i].problem for i in same])
        for j, i in enumerate(same):
            graded[i] = (result.verdicts[j], float(result.total[j]))
    return graded


__all__ = ["Fault", "graded_together", "take_step", "take_steps"]
