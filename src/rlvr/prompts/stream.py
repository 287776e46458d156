"""Where each step's training prompts come from: a seeded uniform stream, or a curriculum over bands.

Both are deterministic given (seed, step, round), so a resumed run draws exactly the prompts the
uninterrupted run would have drawn; their state (a position, or the curriculum's estimates) goes into
every checkpoint.
"""

from __future__ import annotations

import random

from rlvr.prompts.bands import band_metrics, band_stats
from rlvr.prompts.curriculum import build_curriculum
from rlvr.tasks.base import Problem


class PromptStream:
    """Training prompts in a fresh seeded permutation each epoch; the state is just the position."""

    def __init__(self, problems, seed: int):
        if not problems:
            raise ValueError("the task's train split is empty")
        self.problems, self.seed, self.position = problems, seed, 0

    def take(self, n: int, step: int, round_: int):
        out = []
        for _ in range(n):
            epoch, i = divmod(self.position, len(self.problems))
            order = list(range(len(self.problems)))
            random.Random(f"{self.seed}-{epoch}").shuffle(order)
            out.append(self.problems[order[i]])
            self.position += 1
        return out

    def observe(self, step: int, batch) -> None:
        """Nothing to learn: the uniform stream ignores outcomes."""

    def state_dict(self) -> dict:
        return {"position": self.position}

    def load_state_dict(self, state: dict) -> None:
        self.position = state["position"]


class CurriculumStream:
    """Prompts drawn by a curriculum sampler, which learns each band's success rate from the step's groups."""

    def __init__(self, cfg: dict, problems, seed: int):
        self.sampler, self.seed = build_curriculum(cfg, problems), seed

    def take(self, n: int, step: int, round_: int):
        return self.sampler.next_batch(step, n, random.Random(f"{self.seed}-{step}-{round_}"))

    def observe(self, step: int, batch) -> None:
        # Every generated group counts, before dynamic sampling drops the uninformative ones: those are
        # exactly the groups that tell the curriculum a band is solved or out of reach.
        self.sampler.update(step, band_stats(*_band_columns(batch)))

    def state_dict(self) -> dict:
        return self.sampler.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.sampler.load_state_dict(state)


def make_stream(cfg: dict, problems, seed: int):
    return CurriculumStream(cfg, problems, seed) if cfg else PromptStream(problems, seed)


def _band_columns(batch):
    return (
        [p.band for p in batch.problems],
        batch.rewards.tolist(),
        batch.group_ids.tolist(),
        [v.status == "correct" for v in batch.verdicts],
    )


def step_band_metrics(batch) -> dict:
    """band/<name>/{reward,success,nonzero_var_frac,share} over the step's generated rows."""
    return band_metrics(*_band_columns(batch))


def spread_over_bands(problems, n: int):
    """Up to n problems taken round-robin over bands (in task order): a small validation set that still
    covers every band."""
    by_band: dict[str, list] = {}
    for p in problems:
        by_band.setdefault(p.band, []).append(p)
    out, i = list[Problem](), 0
    while len(out) < n and any(i < len(v) for v in by_band.values()):
        out += [v[i] for v in by_band.values() if i < len(v)][: n - len(out)]
        i += 1
    return out
