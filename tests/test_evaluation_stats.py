"""pass@k against brute force, bootstrap coverage by simulation, paired verdicts on planted effects."""

import itertools
import math

import numpy as np
import pytest

from rlvr.evaluation.stats import (
    bootstrap_ci,
    mean_correct,
    paired_bootstrap,
    paired_verdict,
    pass_at_k,
    wilson_interval,
)


def brute_pass_at_k(n, c, k):
    """Fraction of all k-subsets of n samples (c of them correct) holding at least one correct."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_matches_enumeration(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k), abs=1e-12), (n, c, k)


@pytest.mark.parametrize(
    "n, c, k, expected",
    [
        (10, 0, 5, 0.0),  # nothing correct: nothing to find
        (10, 10, 1, 1.0),  # all correct
        (10, 3, 1, 0.3),  # pass@1 is c/n
        (5, 1, 2, 0.4),  # 1 - C(4,2)/C(5,2) = 1 - 6/10
        (4, 2, 3, 1.0),  # n - c < k: every 3-subset holds a correct one
        (6, 2, 3, 0.8),  # 1 - C(4,3)/C(6,3) = 1 - 4/20
    ],
)
def test_pass_at_k_hand_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_large_n_is_stable_and_matches_closed_form():
    # C(1000, 500) overflows a float; the product form does not.
    assert pass_at_k(1000, 1, 10) == pytest.approx(10 / 1000)
    assert pass_at_k(200, 50, 20) == pytest.approx(1 - math.comb(150, 20) / math.comb(200, 20))


@pytest.mark.parametrize("n, c, k", [(4, 5, 1), (4, -1, 1), (4, 2, 0), (4, 2, 5), (0, 0, 1)])
def test_pass_at_k_rejects_impossible_inputs(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_mean_correct_is_fraction_of_samples():
    assert mean_correct([True, False, False, True]) == 0.5
    with pytest.raises(ValueError):
        mean_correct([])


def test_bootstrap_ci_degenerate_and_ordered():
    assert bootstrap_ci([0.5] * 20) == (0.5, 0.5, 0.5)
    assert bootstrap_ci([1.0]) == (1.0, 1.0, 1.0)
    point, lo, hi = bootstrap_ci([0, 1] * 50, seed=3)
    assert point == 0.5 and lo < 0.5 < hi
    # The interval of a mean of 100 fair coins is about +-1.96 * 0.05 wide.
    assert hi - lo == pytest.approx(2 * 1.96 * 0.05, abs=0.03)


def test_bootstrap_ci_is_reproducible_and_takes_other_stats():
    vals = np.random.default_rng(0).random(50)
    assert bootstrap_ci(vals, seed=7) == bootstrap_ci(vals, seed=7)
    point, lo, hi = bootstrap_ci(vals, stat=np.median, n_boot=300)
    assert point == pytest.approx(float(np.median(vals))) and lo <= point <= hi


@pytest.mark.parametrize("rate, m", [(0.3, 100), (0.8, 60)])
def test_bootstrap_coverage_by_simulation(rate, m):
    """A known Bernoulli rate lands inside its 95% interval about 95% of the time."""
    rng = np.random.default_rng(12345)
    sims, inside = 400, 0
    for s in range(sims):
        values = (rng.random(m) < rate).astype(float)
        _, lo, hi = bootstrap_ci(values, n_boot=1000, seed=s)
        inside += lo <= rate <= hi
    assert 0.90 <= inside / sims <= 0.99


def test_bootstrap_coverage_with_uneven_problem_difficulty():
    """Problems of different difficulty, 4 samples each: the population pass@1 is still covered."""
    rng = np.random.default_rng(7)
    sims, inside, m, n = 300, 0, 80, 4
    true_rate = 2 / (2 + 3)  # mean of Beta(2, 3)
    for s in range(sims):
        difficulty = rng.beta(2, 3, size=m)
        per_problem = (rng.random((m, n)) < difficulty[:, None]).mean(axis=1)
        _, lo, hi = bootstrap_ci(per_problem, n_boot=1000, seed=s)
        inside += lo <= true_rate <= hi
    assert 0.90 <= inside / sims <= 0.99


def test_paired_identical_models_are_inside_the_noise():
    vals = (np.random.default_rng(1).random(200) < 0.4).astype(float)
    diff, lo, hi = paired_bootstrap(vals, vals.copy())
    assert (diff, lo, hi) == (0.0, 0.0, 0.0)
    assert paired_verdict(lo, hi) == "inside the noise"


def test_paired_planted_gain_is_better_and_loss_is_worse():
    rng = np.random.default_rng(2)
    base = (rng.random(200) < 0.3).astype(float)
    # The candidate keeps every base success and also solves 40% of the rest: a true gain of ~0.28.
    cand = np.maximum(base, (rng.random(200) < 0.4).astype(float))
    diff, lo, hi = paired_bootstrap(cand, base)
    assert diff == pytest.approx(cand.mean() - base.mean())
    assert 0 < lo < diff < hi
    assert paired_verdict(lo, hi) == "better"
    assert paired_verdict(*paired_bootstrap(base, cand)[1:]) == "worse"


def test_paired_small_random_flip_is_inside_the_noise():
    rng = np.random.default_rng(3)
    base = (rng.random(100) < 0.5).astype(float)
    cand = base.copy()
    cand[[3, 17]] = 1 - cand[[3, 17]]  # two problems change, in opposite or same directions
    assert paired_verdict(*paired_bootstrap(cand, base)[1:]) == "inside the noise"


def test_paired_interval_is_narrower_than_unpaired():
    """Problem difficulty shared by both models cancels in the paired difference."""
    rng = np.random.default_rng(4)
    difficulty = rng.random(150)
    base = (difficulty < 0.5).astype(float)
    cand = (difficulty < 0.6).astype(float)
    _, lo, hi = paired_bootstrap(cand, base)
    _, alo, ahi = bootstrap_ci(cand)
    _, blo, bhi = bootstrap_ci(base)
    unpaired_half = math.hypot((ahi - alo) / 2, (bhi - blo) / 2)
    assert (hi - lo) / 2 < unpaired_half / 2


def test_paired_needs_same_problems():
    with pytest.raises(ValueError):
        paired_bootstrap([1, 0, 1], [1, 0])


@pytest.mark.parametrize(
    "lo, hi, verdict",
    [
        (0.01, 0.2, "better"),
        (-0.2, -0.01, "worse"),
        (-0.1, 0.1, "inside the noise"),
        (0.0, 0.2, "inside the noise"),  # touching zero does not exclude no difference
    ],
)
def test_paired_verdict_table(lo, hi, verdict):
    assert paired_verdict(lo, hi) == verdict


def test_wilson_interval_hand_values():
    z2 = 1.959964**2
    assert wilson_interval(0, 10) == pytest.approx((0.0, z2 / (10 + z2)))
    assert wilson_interval(10, 10) == pytest.approx((10 / (10 + z2), 1.0))
    lo, hi = wilson_interval(50, 100)
    assert lo == pytest.approx(1 - hi) and lo == pytest.approx(0.4038, abs=1e-3)
