"""The numbers behind an honest evaluation: pass@k, bootstrap intervals over problems, paired differences.

Problems, not samples, are the unit of resampling: the n samples of one problem are correlated (same
question, same difficulty), so treating them as independent would make every interval too narrow.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

VERDICTS = ("better", "worse", "inside the noise")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem: the chance that k of the n samples, drawn without replacement,
    contain at least one of the c correct ones.

    pass@k = 1 - C(n-c, k) / C(n, k), computed as 1 - prod_{i=n-c+1..n} (1 - k/i) so that large n
    never overflows a binomial coefficient (Chen et al. 2021, "Evaluating Large Language Models
    Trained on Code").
    """
    if not (0 <= c <= n) or n < 1:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and n >= 1, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass@{k} needs 1 <= k <= n samples per problem, got n={n}")
    if n - c < k:  # every k-subset must contain a correct sample
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def coverage_ks(n: int) -> list[int]:
    """The k of a coverage curve over n samples per problem: 1, 2, 4, ... up to n, and n itself (pass@n, the
    most the samples can show). n = 0 (greedy only): []."""
    if n < 0:
        raise ValueError(f"samples per problem must be >= 0, got {n}")
    ks = [2**i for i in range(n.bit_length()) if 2**i <= n]
    return ks + ([n] if n and ks[-1] != n else [])


def mean_correct(successes: Sequence[bool]) -> float:
    """Per-problem pass@1: the fraction of its n samples that were correct (the unbiased pass@1)."""
    if len(successes) == 0:
        raise ValueError("a problem with no samples has no pass@1")
    return float(np.mean(np.asarray(successes, dtype=float)))


def _resample_stat(values: np.ndarray, idx: np.ndarray, stat: Callable | None) -> np.ndarray:
    """stat over each row of values[idx]; idx (n_boot, m) -> (n_boot,). Mean is vectorised."""
    if stat is None:
        return values[idx].mean(axis=1)
    return np.array([stat(values[row]) for row in idx], dtype=float)


def _percentile(draws: np.ndarray, alpha: float) -> tuple[float, float]:
    lo, hi = np.quantile(draws, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def _check(values, alpha: float, n_boot: int) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"need a non-empty 1-D list of per-problem values, got shape {arr.shape}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    return arr


def bootstrap_ci(
    values_per_problem: Sequence[float],
    stat: Callable | None = None,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Percentile bootstrap over problems: (point, lo, hi) for stat (default: the mean).

    values_per_problem: (m,) one number per problem (e.g. its pass@1). Each of n_boot draws resamples
    m problems with replacement; lo/hi are the alpha/2 and 1-alpha/2 quantiles of the drawn stats.
    When every problem has the same value (a band the model never solves) the interval has zero
    width: the bootstrap cannot see variation that the sample does not show. wilson_interval gives a
    sounder bound for such a band when its problems are one sample each.
    """
    arr = _check(values_per_problem, alpha, n_boot)
    point = float(arr.mean()) if stat is None else float(stat(arr))
    idx = np.random.default_rng(seed).integers(0, arr.size, size=(n_boot, arr.size))
    lo, hi = _percentile(_resample_stat(arr, idx, stat), alpha)
    return point, lo, hi


def paired_bootstrap(
    a_per_problem: Sequence[float],
    b_per_problem: Sequence[float],
    stat: Callable | None = None,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Paired bootstrap of stat(a) - stat(b) over the same problems: (diff, lo, hi).

    a, b: (m,) per-problem values, aligned (row i is the same problem for both). Each draw resamples
    problem indices once and applies them to both, so the difficulty a problem adds to both models
    cancels: that is what makes a paired interval narrower than two separate ones.
    """
    a = _check(a_per_problem, alpha, n_boot)
    b = _check(b_per_problem, alpha, n_boot)
    if a.shape != b.shape:
        raise ValueError(f"paired values must cover the same problems, got {a.size} and {b.size}")
    point = float(a.mean() - b.mean()) if stat is None else float(stat(a) - stat(b))
    idx = np.random.default_rng(seed).integers(0, a.size, size=(n_boot, a.size))
    draws = _resample_stat(a, idx, stat) - _resample_stat(b, idx, stat)
    lo, hi = _percentile(draws, alpha)
    return point, lo, hi


def fmt_diff(d: dict) -> str:
    """A paired difference {diff, lo, hi} -> '+0.067 [+0.033, +0.100]' (signed, as a gain or a loss)."""
    return f"{d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]"


def paired_verdict(lo: float, hi: float) -> str:
    """'better' when the whole interval of (candidate - baseline) is above 0, 'worse' when below,
    otherwise 'inside the noise' (an interval touching 0 does not exclude no difference)."""
    if lo > hi:
        raise ValueError(f"interval has lo > hi: ({lo}, {hi})")
    if lo > 0:
        return "better"
    if hi < 0:
        return "worse"
    return "inside the noise"


def wilson_interval(successes: int, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval for a binomial rate; sane at 0 and at trials (where the normal one is not).

    Only for independent trials: per-sample rates pooled across problems are not, use bootstrap_ci.
    """
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes}/{trials}")
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)
