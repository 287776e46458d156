"""Contention said out loud: how much of the machine other processes took while this run trained.

A time-budgeted run on a busy machine trains fewer steps and reports a weaker result without any error. So the
loop reads two counters at the start and end of every step and of the whole training phase (Linux /proc; elsewhere
nothing is recorded):

    busy      CPU-seconds every process on the machine spent (/proc/stat: user + nice + system + irq + softirq +
              steal; idle and iowait are not busy)
    own       CPU-seconds this process and its descendants spent (utime + stime + cutime + cstime of each, from
              /proc/PID/stat): the reward workers and the compiler included

    other_cpu_s   = (busy_after - busy_before) - (own_after - own_before)
    other_share   = other_cpu_s / (cores * wall seconds)     the share of the machine's CPU capacity others took

A run writes its figures into RUN/contention.json (with the steps and steps per minute, and the settings it computed
in bf16 that the CPU emulates) and each step's `time/other_cpu_share` into its metrics line; both reports warn from
them (`contention_warning`, `emulated_bf16_warning`): only of what the run measured or knows of itself.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Other processes taking more than this share of the machine's CPU capacity during training are worth a warning:
# on the 2-core machine it is half a core all the time. The update runs its matmuls on every core, so a step
# waits for the slowest core: measured on the reasoning-gym preset, others' load cut the update from about 400 to
# 26-85 train tok/s and the steps from about 60 to 9 (issue 33).
OTHER_SHARE_WARN = 0.25
# A run below this fraction of the user's own quiet run's steps per minute (log.quiet_steps_per_min, a figure they
# measured on their machine; no preset carries one, as a figure from another machine says nothing about this one).
SLOW_FRACTION = 0.5

_PROC = Path("/proc")


@dataclass(frozen=True)
class CpuSnapshot:
    """Counters at one moment: wall clock (s), the whole machine's busy CPU-seconds, this process tree's."""

    wall: float
    busy_s: float
    own_s: float
    cores: int


def _ticks() -> float:
    return float(os.sysconf("SC_CLK_TCK"))


def _machine_busy_s() -> float:
    fields = (_PROC / "stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / _ticks()


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:  # the process ended between the listing and the read
        return None
    return text[text.rindex(")") + 2 :].split()  # fields from the state on; the name may hold spaces


def _children(pid: int) -> list[int] | None:
    """pid's children from /proc/PID/task/*/children (Linux 3.5+, CONFIG_PROC_CHILDREN); None where the kernel
    does not list them (some sandboxes), [] for a process that has ended."""
    task_dir = _PROC / str(pid) / "task"
    try:
        tasks = os.listdir(task_dir)
    except OSError:
        return []
    out = []
    for t in tasks:
        try:
            out += [int(c) for c in (task_dir / t / "children").read_text().split()]
        except FileNotFoundError:
            if (task_dir / t).exists():
                return None  # the thread is there, its children list is not: not listed by this kernel
        except OSError:
            continue
    return out


def _tree(root: int) -> set[int]:
    """root and its live descendants: through the kernel's children lists, else one scan of every process."""
    tree, frontier = {root}, [root]
    while frontier:
        kids = [_children(pid) for pid in frontier]
        listed = [k for k in kids if k is not None]
        if len(listed) < len(kids):  # a children list not readable: scan instead
            return _tree_by_scan(root)
        frontier = [c for k in listed for c in k if c not in tree]
        tree.update(frontier)
    return tree


def _tree_by_scan(root: int) -> set[int]:
    parents = {
        int(e.name): int(f[1])
        for e in _PROC.iterdir()
        if e.name.isdigit() and (f := _stat_fields(int(e.name))) is not None
    }
    tree, frontier = {root}, {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier and pid not in tree}
        tree |= frontier
    return tree


def _tree_cpu_s(root: int) -> float:
    """CPU-seconds of `root` and every live descendant (each with its reaped children's)."""
    total = 0
    for pid in _tree(root):
        f = _stat_fields(pid)
        total += sum(int(x) for x in f[11:15]) if f is not None else 0  # utime stime cutime cstime
    return total / _ticks()


def snapshot() -> CpuSnapshot | None:
    """The counters now; None where /proc is not there to read (not Linux)."""
    try:
        return CpuSnapshot(time.time(), _machine_busy_s(), _tree_cpu_s(os.getpid()), os.cpu_count() or 1)
    except (OSError, ValueError):
        return None


def other_cpu(before: CpuSnapshot | None, after: CpuSnapshot | None) -> dict | None:
    """What other processes took between two snapshots: {"wall_s", "cores", "busy_cpu_s", "own_cpu_s",
    "other_cpu_s", "other_share"}; None without both snapshots. Clamped at 0: the counters tick at 1/CLK_TCK s
    and a descendant that ended unreaped between the two readings can make the difference slightly negative."""
    if before is None or after is None:
        return None
    wall = max(after.wall - before.wall, 1e-9)
    busy, own = after.busy_s - before.busy_s, after.own_s - before.own_s
    other = max(busy - own, 0.0)
    return {
        "wall_s": wall,
        "cores": after.cores,
        "busy_cpu_s": busy,
        "own_cpu_s": own,
        "other_cpu_s": other,
        "other_share": min(other / (after.cores * wall), 1.0),
    }


def emulated_bf16(cfg, sampler, model) -> list[str]:
    """The settings this run computes in bf16 that the CPU emulates (rlvr.machine.emulates_bf16, the rule the start-up
    warnings follow): rollout.dtype where the sampler computes on this CPU, train.autocast where the policy does."""
    from rlvr.machine import auto_dtype, emulates_bf16
    from rlvr.policy.load import model_device
    from rlvr.sampling import samples_on_cpu

    settings = {
        "rollout.dtype": (auto_dtype(cfg.rollout.dtype, "float32"), samples_on_cpu(sampler, cfg.rollout.backend)),
        "train.autocast": (cfg.train.autocast, model_device(model).type == "cpu"),
    }
    return [key for key, (dtype, on_cpu) in settings.items() if emulates_bf16(dtype, on_cpu)]


def run_figures(
    before: CpuSnapshot | None, after: CpuSnapshot | None, steps: int, train_s: float, emulated: list[str] | None = None
) -> dict:
    """RUN/contention.json: the training phase's steps, seconds and steps per minute, the torch thread count and the
    OpenMP wait policy and spin count it ran with (the thread count decides how float reductions split, so two seeded
    runs sample alike only at the same count; load alone changes nothing: docs/reliability.md), the settings it
    computed in emulated bf16 (`emulated_bf16`, when known), and other_cpu's figures (absent where /proc is not
    readable)."""
    import torch

    out: dict[str, Any] = {
        "steps": steps,
        "train_s": train_s,
        "steps_per_min": 60 * steps / train_s if train_s > 0 else 0.0,
    }
    out |= {
        "torch_threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
        "gomp_spincount": os.environ.get("GOMP_SPINCOUNT", ""),
    }
    if emulated is not None:
        out["emulated_bf16"] = emulated
    return {**out, **(other_cpu(before, after) or {})}


def contention_warning(figures: dict | None, quiet_steps_per_min: float = 0.0) -> str | None:
    """One plain sentence when the run was contended (other processes took more than OTHER_SHARE_WARN of the CPU
    capacity) or slow against the user's own figure (below SLOW_FRACTION of log.quiet_steps_per_min, when > 0: a
    figure measured on the user's machine, never one from another). A slow run that other processes did not crowd
    says what it ruled out (load, emulated bf16) and what is left. None otherwise: a run has no figure of its own
    to call itself slow by."""
    if not figures:
        return None
    share, rate = figures.get("other_share"), figures.get("steps_per_min", 0.0)
    busy = share is not None and share > OTHER_SHARE_WARN
    slow = quiet_steps_per_min > 0 and rate < SLOW_FRACTION * quiet_steps_per_min
    reasons = []
    if busy:
        reasons.append(
            f"other processes took {share:.0%} of the machine's CPU capacity during RL training "
            f"({figures['other_cpu_s']:.0f} CPU-s of {figures['cores']} cores x {figures['wall_s']:.0f} s; "
            f"warned above {OTHER_SHARE_WARN:.0%})"
        )
    if slow:
        reasons.append(
            f"it trained {rate:.1f} steps a minute against the {quiet_steps_per_min:g} of log.quiet_steps_per_min, "
            f"your figure for a quiet run (warned below {SLOW_FRACTION:.0%} of it)"
        )
    if not reasons:
        return None
    if slow and not busy:
        return (
            "This run was slow: "
            + reasons[0]
            + ", while other processes took "
            + (f"only {share:.0%}" if share is not None else "an unknown share")
            + " of the CPU"
            + _what_is_left(share, figures.get("emulated_bf16"))
            + " A time budget then buys fewer steps and a weaker result; `rlvr run --steps N` trains a set number."
        )
    spinning = busy and figures.get("gomp_spincount") not in (None, "", "0")
    return (
        "This run was contended: "
        + "; ".join(reasons)
        + ". A time budget then buys fewer steps and a weaker result; rerun on a quiet machine, or with `rlvr run "
        "--steps N` for a result that does not depend on load."
        + (
            f" Its OpenMP threads spun {figures['gomp_spincount']} times before sleeping (fastest alone); on a "
            "machine shared as a rule, `OMP_WAIT_POLICY=PASSIVE` in the environment makes them sleep at once and "
            "keeps more of a run's speed beside other work."
            if spinning
            else ""
        )
    )


def _what_is_left(share: float | None, emulated: list[str] | None) -> str:
    """A slow run's cause, after other processes' share did not explain it: the bf16 it computed emulated, else what
    it ruled out (load where /proc measured it, emulated bf16 where the run recorded it) and what is left."""
    if emulated:
        return (
            f", and it computed {', '.join(emulated)} in bf16 this CPU emulates: the likely cause (set them to auto)."
        )
    ruled_out = (["not load"] if share is not None else []) + (["not emulated bf16"] if emulated is not None else [])
    left = "this machine" + (", its load" if share is None else "") + " or the work a step does"
    return (
        f": {' and '.join(ruled_out) + ', so ' if ruled_out else ''}{left} (completion lengths, the rollout and train "
        "settings) differs from the run that figure was measured on."
    )


def emulated_bf16_warning(figures: dict | None) -> str | None:
    """One sentence when the run computed in bf16 that this CPU emulates (RUN/contention.json's emulated_bf16); None
    otherwise, and for a run that did not record it."""
    emulated = (figures or {}).get("emulated_bf16")
    if not emulated:
        return None
    settings = " and ".join(f"{key}=bfloat16" for key in emulated)
    return (
        f"This run computed in emulated bf16: {settings} on a CPU without bf16 in hardware (no avx512_bf16 or "
        "amx_bf16 in its flags), where torch emulates it, tens of times slower than float32 (benchmarks/bf16_matmul.py), "
        "so a time budget buys far fewer steps; `auto` there picks float32."
    )


__all__ = [
    "CpuSnapshot",
    "OTHER_SHARE_WARN",
    "SLOW_FRACTION",
    "snapshot",
    "other_cpu",
    "emulated_bf16",
    "run_figures",
    "contention_warning",
    "emulated_bf16_warning",
]
