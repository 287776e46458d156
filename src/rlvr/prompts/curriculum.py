"""Curriculum by difficulty: which bands the next batch of prompts comes from.

A group whose G samples are all right or all wrong has zero advantage and gives no gradient. The samplers
here choose how many of the next batch's prompts come from each difficulty band (`Problem.band`):

- `FixedMix`: a given mix (equal per band when none is given);
- `ScheduleMix`: a mix that moves with the step, linear between (step, weights) points;
- `Adaptive`: a mix driven by what the run measures. Per band it keeps the success rate and the fraction
  of informative (nonzero-variance) groups over the band's last `window` observed steps; bands whose
  success rate lies in `target` share the weight in proportion to their informative fraction, and every
  band keeps at least `floor` of the batch so none is forgotten (and a band that got easier or harder is
  noticed).

All three share one interface: `next_batch(step, n_prompts, rng)`, `update(step, per_band_stats)`,
`shares()`, and `state_dict()` / `load_state_dict()` (plain JSON) so a resumed run draws the same prompts.
Within a band, prompts are drawn without replacement, one shuffled epoch after another. Each epoch's
order comes from a seed drawn from the caller's rng and kept in the state, so the state stays small.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import random
from collections.abc import Sequence
from typing import Any

from rlvr.config import ConfigError
from rlvr.prompts.bands import STAT_KEYS
from rlvr.registry import Registry
from rlvr.tasks.base import Problem

_EPS = 0.01  # keeps an in-window band with no informative group yet above zero weight


def _as_rng(rng: random.Random | int) -> random.Random:
    return rng if isinstance(rng, random.Random) else random.Random(rng)


class _BandPool:
    """One band's problems, dealt without replacement in shuffled epochs; position is (seed, epoch, cursor)."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        # which problems, in which order: a resume on other data must fail loudly, not deal other prompts
        self.fingerprint = hashlib.sha256("\n".join(p.id for p in problems).encode()).hexdigest()[:16]
        self.seed: int | None = None  # seed of the current epoch's order; None before the first draw
        self.epoch = -1
        self.cursor = 0
        self._order: list[int] = []

    def _start_epoch(self, rng: random.Random) -> None:
        self.seed, self.epoch, self.cursor = rng.getrandbits(63), self.epoch + 1, 0
        self._rebuild()

    def _rebuild(self) -> None:
        self._order = list(range(len(self.problems)))
        random.Random(self.seed).shuffle(self._order)

    def take(self, k: int, rng: random.Random) -> list[Problem]:
        out = []
        for _ in range(k):
            if self.seed is None or self.cursor >= len(self._order):
                self._start_epoch(rng)
            out.append(self.problems[self._order[self.cursor]])
            self.cursor += 1
        return out

    def state(self) -> dict:
        return {
            "size": len(self.problems),
            "ids": self.fingerprint,
            "seed": self.seed,
            "epoch": self.epoch,
            "cursor": self.cursor,
        }

    def load(self, state: dict, band: str) -> None:
        if state["size"] != len(self.problems):
            raise ValueError(f"curriculum state: band {band!r} had {state['size']} problems, now {len(self.problems)}")
        if state["ids"] != self.fingerprint:
            raise ValueError(f"curriculum state: band {band!r} holds other problems (or in another order) than saved")
        self.seed, self.epoch, self.cursor = state["seed"], state["epoch"], state["cursor"]
        if self.seed is not None:
            self._rebuild()


def allocate(shares: Sequence[float], n: int, rng: random.Random) -> list[int]:
    """Split n prompts over bands with the given shares (summing to 1), unbiased and with low variance.

    Each band gets floor(n * share) plus at most one more; the leftovers go by systematic sampling over
    the fractional parts, so E[count_b] = n * share_b exactly and counts never stray by more than one.
    """
    want = [n * s for s in shares]
    base = [math.floor(w) for w in want]
    fracs = [w - c for w, c in zip(want, base)]
    left, counts = n - sum(base), list(base)
    if left > 0:
        u, acc, i = rng.random(), 0.0, 0
        for b, f in enumerate(fracs):
            acc += f
            if i < left and u + i < acc:  # each frac < 1, so at most one point falls in a band's interval
                counts[b], i = counts[b] + 1, i + 1
        spare = sorted((b for b in range(len(fracs)) if counts[b] == base[b]), key=lambda b: -fracs[b])
        for b in spare[: left - i]:  # only when float round-off left the last point past the end
            counts[b] += 1
    return counts


class _Sampler:
    """Shared machinery: band pools, batch drawing, the per-band stats window, and state."""

    kind = ""

    def __init__(self, problems: Sequence[Problem], window: int = 8):
        if not problems:
            raise ConfigError("curriculum: the problem pool is empty")
        by_band: dict[str, list[Problem]] = {}
        for p in problems:  # bands keep their order of first appearance (tasks list them easy first)
            by_band.setdefault(p.band, []).append(p)
        self.bands = list(by_band)
        self.pools = {b: _BandPool(ps) for b, ps in by_band.items()}
        self.window = window
        self.history: dict[str, list[list[float]]] = {b: [] for b in self.bands}  # [step, groups, *STAT_KEYS]
        self.step = 0

    def _shares_at(self, step: int) -> dict[str, float]:
        raise NotImplementedError

    def shares(self) -> dict[str, float]:
        """The mix (band -> share, summing to 1) the next batch is drawn from, as of the last step seen."""
        return self._shares_at(self.step)

    def next_batch(self, step: int, n_prompts: int, rng: random.Random | int) -> list[Problem]:
        """n_prompts problems for `step`, mixed by band per `shares()` and shuffled across bands."""
        rng = _as_rng(rng)
        self.step = int(step)
        shares = self._shares_at(step)
        counts = allocate([shares[b] for b in self.bands], n_prompts, rng)
        batch = [p for b, k in zip(self.bands, counts) for p in self.pools[b].take(k, rng)]
        rng.shuffle(batch)  # so micro-batches see a mix, not one band each
        return batch

    def update(self, step: int, per_band_stats: dict[str, dict[str, float]]) -> None:
        """Record one step's per-band stats ({band: {reward, success, nonzero_var_frac, groups}})."""
        self.step = int(step)
        for band, st in per_band_stats.items():
            if band not in self.history:
                raise ValueError(f"curriculum.update: unknown band {band!r}; bands: {self.bands}")
            if st.get("groups", 0) <= 0:
                continue
            row = [int(step), int(st["groups"]), *(float(st[k]) for k in STAT_KEYS)]  # plain types: JSON state
            self.history[band] = (self.history[band] + [row])[-self.window :]

    def estimates(self) -> dict[str, dict[str, float] | None]:
        """Per band, the group-weighted means of STAT_KEYS over its window (None for a band not yet seen)."""
        out: dict[str, dict[str, float] | None] = {}
        for b, rows in self.history.items():
            n = sum(r[1] for r in rows)
            est = {k: sum(r[1] * r[2 + i] for r in rows) / n for i, k in enumerate(STAT_KEYS)} if n else None
            if est is not None:
                est["groups"] = n
            out[b] = est
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "step": self.step,
            "pools": {b: self.pools[b].state() for b in self.bands},
            "history": {b: [list(r) for r in rows] for b, rows in self.history.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("kind") != self.kind:
            raise ValueError(f"curriculum state is for kind {state.get('kind')!r}, this sampler is {self.kind!r}")
        if sorted(state["pools"]) != sorted(self.bands):
            raise ValueError(f"curriculum state bands {sorted(state['pools'])} != pool bands {sorted(self.bands)}")
        for b in self.bands:
            self.pools[b].load(state["pools"][b], b)
        self.history = {b: [list(r) for r in state["history"].get(b, [])] for b in self.bands}
        self.step = state["step"]


def _normalise(weights: dict[str, float] | None, bands: list[str], where: str) -> dict[str, float]:
    """Band -> share summing to 1; None means equal per band; a band not named gets 0."""
    if weights is None:
        return {b: 1.0 / len(bands) for b in bands}
    if not isinstance(weights, dict):
        raise ConfigError(f"{where}: expected a mapping band -> weight, got {weights!r}")
    for b, w in weights.items():
        if b not in bands:
            raise ConfigError(f"{where}: unknown band {b!r}; bands: {', '.join(bands)}")
        if not isinstance(w, (int, float)) or w < 0 or math.isnan(w):
            raise ConfigError(f"{where}.{b}: weight must be a number >= 0, got {w!r}")
    total = sum(weights.values())
    if total <= 0:
        raise ConfigError(f"{where}: weights sum to {total}; at least one band needs weight > 0")
    return {b: weights.get(b, 0.0) / total for b in bands}


class FixedMix(_Sampler):
    """The same mix every step. `weights=None` gives every band an equal share."""

    kind = "fixed"

    def __init__(self, problems: Sequence[Problem], weights: dict[str, float] | None = None, window: int = 8):
        super().__init__(problems, window)
        self.mix = _normalise(weights, self.bands, "curriculum.weights")

    def _shares_at(self, step: int) -> dict[str, float]:
        return dict(self.mix)


class ScheduleMix(_Sampler):
    """A mix that moves with the step: each point's weights are normalised, then shares are interpolated
    linearly between neighbouring points (held flat before the first point and after the last)."""

    kind = "schedule"

    def __init__(self, problems: Sequence[Problem], points: Sequence, window: int = 8):
        super().__init__(problems, window)
        if not points:
            raise ConfigError("curriculum.points: need at least one (step, weights) point")
        parsed: list[tuple[int, dict[str, float]]] = []
        for i, pt in enumerate(points):
            step, w = (pt.get("step"), pt.get("weights")) if isinstance(pt, dict) else pt
            if not isinstance(step, int) or (parsed and step <= parsed[-1][0]):
                raise ConfigError(f"curriculum.points[{i}]: step must be an int above the previous one, got {step!r}")
            parsed.append((step, _normalise(w, self.bands, f"curriculum.points[{i}].weights")))
        self.points = parsed

    def _shares_at(self, step: int) -> dict[str, float]:
        pts = self.points
        if step <= pts[0][0]:
            return dict(pts[0][1])
        for (s0, w0), (s1, w1) in zip(pts, pts[1:]):
            if step <= s1:
                t = (step - s0) / (s1 - s0)
                return {b: (1 - t) * w0[b] + t * w1[b] for b in self.bands}
        return dict(pts[-1][1])


class Adaptive(_Sampler):
    """Most of the batch from bands the policy solves sometimes; a floor share for every band.

    score_b = nonzero_var_frac_b + eps for bands whose windowed success rate lies in `target` (a band not
    yet seen counts as in the window and fully informative, so the first batches explore every band);
    score_b = 0 outside the window. If no band is in the window, every band is scored by its informative
    fraction, so the nearest-to-learnable bands still lead. share_b = floor + (1 - floor * K) * score_b / sum.
    """

    kind = "adaptive"

    def __init__(
        self,
        problems: Sequence[Problem],
        target: Sequence[float] = (0.1, 0.9),
        floor: float = 0.05,
        window: int = 8,
    ):
        super().__init__(problems, window)
        lo, hi = _check_target(target)
        k = len(self.bands)
        if not isinstance(floor, (int, float)) or not 0 <= floor * k <= 1:
            raise ConfigError(f"curriculum.floor: must be in [0, 1/{k}] for {k} bands, got {floor!r}")
        self.target, self.floor = (lo, hi), float(floor)

    def _shares_at(self, step: int) -> dict[str, float]:
        est = self.estimates()
        lo, hi = self.target
        nzv = {b: 1.0 if e is None else e["nonzero_var_frac"] for b, e in est.items()}
        inside = {b for b, e in est.items() if e is None or lo <= e["success"] <= hi}
        score = {b: (nzv[b] + _EPS) if (b in inside or not inside) else 0.0 for b in self.bands}
        total, free = sum(score.values()), 1.0 - self.floor * len(self.bands)
        return {b: self.floor + free * score[b] / total for b in self.bands}


def _check_target(target: Any) -> tuple[float, float]:
    ok = isinstance(target, (list, tuple)) and len(target) == 2 and all(isinstance(x, (int, float)) for x in target)
    if not ok or not 0 <= target[0] < target[1] <= 1:
        raise ConfigError(f"curriculum.target: must be [low, high] with 0 <= low < high <= 1, got {target!r}")
    return float(target[0]), float(target[1])


# kind -> (class, allowed keys besides "kind"); data, so a new sampler is one line here. A sampler of the user's is
# `curriculum.kind: package.module:attr`, a class taking (problems, **settings) with the samplers' methods.
CURRICULA: Registry[tuple[type[_Sampler], tuple[str, ...] | None]] = Registry(
    "curriculum", key="curriculum.kind", plugin=lambda cls, ref: (cls, None)
)
CURRICULA.add("fixed", (FixedMix, ("weights", "window")), "fixed band shares (equal by default)")
CURRICULA.add("schedule", (ScheduleMix, ("points", "window")), "band shares interpolated between steps")
CURRICULA.add(
    "adaptive",
    (Adaptive, ("target", "floor", "window")),
    "band shares toward bands whose success lies in the target range",
)


def build_curriculum(cfg: dict | None, problems: Sequence[Problem]) -> _Sampler:
    """A sampler from a config dict such as {"kind": "adaptive", "target": [0.1, 0.9], "floor": 0.05}.

    None or {} gives `fixed` with equal band shares. A wrong kind or key raises ConfigError naming it
    and the choices.
    """
    cfg = dict(cfg or {})
    kind = cfg.pop("kind", "fixed")
    cls, allowed = CURRICULA.get(kind)
    for key in cfg:
        if allowed is not None and key not in allowed:
            raise ConfigError(f"curriculum.{key}: unknown key for kind {kind!r}; choices: kind, {', '.join(allowed)}")
    window = cfg.get("window", 8)
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        raise ConfigError(f"curriculum.window: must be an int >= 1, got {window!r}")
    missing = next((key for key in _required(cls) if key not in cfg), None)
    if missing:
        raise ConfigError(f"curriculum.{missing}: required for kind {kind!r}")
    return cls(problems, **cfg)


def _required(cls) -> list[str]:
    """The settings a sampler cannot do without: its constructor's parameters after `problems` that have no default
    (schedule's points), read from the class so a user's sampler is checked as a built-in is."""
    try:
        params = list(inspect.signature(cls).parameters.values())[1:]
    except (TypeError, ValueError):  # no signature to read: the class checks its own settings
        return []
    return [p.name for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
