"""A simulated policy for trying curricula without a model: per band a known success rate that improves.

Each sampled prompt gets a group of G Bernoulli(p_band(step)) rewards, so the informative-group fraction
of a sampler's choices can be measured in milliseconds. Used by the tests and to choose settings:

    PYTHONPATH=src python -m rlvr.prompts.curriculum_sim    # prints fixed vs adaptive on the default simulation
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from rlvr.prompts.bands import band_metrics, band_stats
from rlvr.prompts.curriculum import build_curriculum
from rlvr.tasks.base import Problem

SuccessRate = Callable[[str, int], float]  # (band, step) -> probability a sample is correct


def logistic_policy(centres: dict[str, float], width: float) -> SuccessRate:
    """p(band, step) = 1 / (1 + exp(-(step - centres[band]) / width)): 0.5 at the band's centre step."""
    return lambda band, step: 1.0 / (1.0 + math.exp(-(step - centres[band]) / width))


def toy_pool(bands: list[str], per_band: int) -> list[Problem]:
    """per_band placeholder problems in each band (ids like "d3-017")."""
    return [Problem(id=f"{b}-{i:03d}", prompt=f"{b} #{i}", answer="0", band=b) for b in bands for i in range(per_band)]


def simulate(sampler, policy: SuccessRate, steps: int, n_prompts: int, group_size: int, seed: int) -> list[dict]:
    """Run `steps` steps of sample -> score -> update; one metrics row per step.

    The sampler and the simulated policy draw from separate rngs, so two samplers under the same seed
    face the same policy noise stream. Row keys: step, groups/nonzero_var_frac, band/<b>/..., and
    curriculum/<b>/share (the mix the batch was drawn from).
    """
    draw_rng, policy_rng = random.Random(seed), random.Random(seed + 10_007)
    rows = []
    for step in range(steps):
        target = sampler.shares()
        batch = sampler.next_batch(step, n_prompts, draw_rng)
        bands, rewards, gids = [], [], []
        for g, prob in enumerate(batch):
            p = policy(prob.band, step)
            for _ in range(group_size):
                bands.append(prob.band)
                rewards.append(1.0 if policy_rng.random() < p else 0.0)
                gids.append(g)
        sampler.update(step, band_stats(bands, rewards, gids))
        metrics = band_metrics(bands, rewards, gids)
        informative = sum(metrics[f"band/{b}/nonzero_var_frac"] * metrics[f"band/{b}/share"] for b in set(bands))
        row = {"step": step, "groups/nonzero_var_frac": informative, **metrics}
        row.update({f"curriculum/{b}/share": s for b, s in target.items()})
        rows.append(row)
    return rows


def mean_informative(rows: list[dict]) -> float:
    return sum(r["groups/nonzero_var_frac"] for r in rows) / len(rows)


DEFAULT_BANDS = ["d1", "d2", "d3", "d4", "d5"]
DEFAULT_POLICY = logistic_policy({"d1": 0, "d2": 40, "d3": 80, "d4": 120, "d5": 160}, width=15)


def main() -> int:
    print("simulated policy: 5 bands, p = logistic((step - c) / 15), c = 0, 40, 80, 120, 160; 16 prompts x G=8")
    print(f"{'curriculum':<44} {'informative frac (mean of 200 steps, seeds 0-4)':>50}")
    for cfg in ({"kind": "fixed"}, {"kind": "adaptive"}, {"kind": "adaptive", "floor": 0.02, "window": 4}):
        per_seed = []
        for seed in range(5):
            sampler = build_curriculum(cfg, toy_pool(DEFAULT_BANDS, 50))
            per_seed.append(mean_informative(simulate(sampler, DEFAULT_POLICY, 200, 16, 8, seed)))
        print(f"{str(cfg):<44} {sum(per_seed) / len(per_seed):>50.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
