"""Curriculum samplers: mixes hand-checked, adaptive on a simulated policy, exact resume, config errors."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from rlvr.config import ConfigError
from rlvr.prompts.bands import band_metrics, band_stats, natural_key, plot_curriculum
from rlvr.prompts.curriculum import (
    Adaptive,
    FixedMix,
    ScheduleMix,
    allocate,
    build_curriculum,
)
from rlvr.prompts.curriculum_sim import (
    DEFAULT_BANDS,
    DEFAULT_POLICY,
    logistic_policy,
    mean_informative,
    simulate,
    toy_pool,
)

# ---------------------------------------------------------------- allocation and drawing


@pytest.mark.parametrize(
    "shares, n, expected",
    [
        ([0.5, 0.5], 4, [2, 2]),  # exact multiples: no randomness left
        ([0.1, 0.2, 0.7], 10, [1, 2, 7]),
        ([1.0, 0.0], 7, [7, 0]),  # a zero share never gets a prompt
        ([0.25, 0.25, 0.25, 0.25], 0, [0, 0, 0, 0]),
    ],
)
def test_allocate_exact_cases(shares, n, expected):
    assert allocate(shares, n, random.Random(0)) == expected


def test_allocate_is_unbiased_and_within_one():
    rng, shares, n, trials = random.Random(1), [0.3, 0.45, 0.25], 5, 4000  # wants 1.5, 2.25, 1.25
    totals = [0, 0, 0]
    for _ in range(trials):
        counts = allocate(shares, n, rng)
        assert sum(counts) == n
        assert [c in (int(n * s), int(n * s) + 1) for c, s in zip(counts, shares)] == [True] * 3
        totals = [t + c for t, c in zip(totals, counts)]
    assert [t / trials for t in totals] == pytest.approx([1.5, 2.25, 1.25], abs=0.03)


def test_allocate_sums_to_n_within_one_of_target_for_random_shares():
    rng = random.Random(7)
    for _ in range(500):
        raw = [rng.random() for _ in range(rng.randint(1, 7))]
        shares, n = [r / sum(raw) for r in raw], rng.randint(0, 40)
        counts = allocate(shares, n, rng)
        assert sum(counts) == n
        assert all(int(n * s) <= c <= int(n * s) + 1 for c, s in zip(counts, shares))


def test_each_band_is_drawn_without_replacement_then_cycles():
    sampler = FixedMix(toy_pool(["a"], 10))
    rng = random.Random(3)
    epoch1 = [p.id for step in (0, 1) for p in sampler.next_batch(step, 5, rng)]
    epoch2 = [p.id for step in (2, 3) for p in sampler.next_batch(step, 5, rng)]
    assert sorted(epoch1) == sorted(epoch2) == [f"a-{i:03d}" for i in range(10)]
    assert epoch1 != epoch2  # each epoch is reshuffled


def test_fixed_mix_counts_and_shares():
    sampler = FixedMix(toy_pool(["a", "b", "c"], 20), weights={"a": 3, "b": 1})
    assert sampler.shares() == {"a": 0.75, "b": 0.25, "c": 0.0}
    rng = random.Random(0)
    drawn = [p.band for step in range(50) for p in sampler.next_batch(step, 8, rng)]
    assert (drawn.count("a"), drawn.count("b"), drawn.count("c")) == (300, 100, 0)  # 6 + 2 per step exactly
    assert FixedMix(toy_pool(["a", "b"], 3)).shares() == {"a": 0.5, "b": 0.5}  # default: equal per band


@pytest.mark.parametrize(
    "step, a, b",
    [
        (-10, 1.0, 0.0),
        (0, 1.0, 0.0),
        (50, 0.75, 0.25),
        (100, 0.5, 0.5),
        (150, 0.25, 0.75),
        (200, 0.0, 1.0),
        (900, 0.0, 1.0),
    ],
)
def test_schedule_interpolates_between_points(step, a, b):
    # points are normalised first: {"a": 2, "b": 2} is 0.5/0.5, then shares move linearly between points
    points = [(0, {"a": 1}), (100, {"a": 2, "b": 2}), {"step": 200, "weights": {"b": 5}}]
    sampler = ScheduleMix(toy_pool(["a", "b"], 4), points)
    sampler.next_batch(step, 4, random.Random(0))
    assert sampler.shares() == pytest.approx({"a": a, "b": b})


# ---------------------------------------------------------------- adaptive


def _feed(sampler, step, **per_band):
    """per_band: band=(success, nonzero_var_frac, groups)."""
    stats = {b: {"reward": s, "success": s, "nonzero_var_frac": v, "groups": g} for b, (s, v, g) in per_band.items()}
    sampler.update(step, stats)


def test_adaptive_shares_hand_checked():
    sampler = Adaptive(toy_pool(["a", "b", "c"], 4), target=(0.1, 0.9), floor=0.1)
    assert sampler.shares() == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})  # nothing seen yet: explore all
    _feed(sampler, 0, a=(0.95, 0.3, 4), b=(0.5, 0.8, 4), c=(0.2, 0.4, 4))
    # a is above the window -> score 0; b: 0.8 + 0.01; c: 0.4 + 0.01; free share = 1 - 3 * 0.1 = 0.7
    assert sampler.shares() == pytest.approx({"a": 0.1, "b": 0.1 + 0.7 * 0.81 / 1.22, "c": 0.1 + 0.7 * 0.41 / 1.22})


def test_adaptive_unseen_band_counts_as_informative():
    sampler = Adaptive(toy_pool(["a", "b"], 4), floor=0.0)
    _feed(sampler, 0, a=(0.5, 0.5, 4))
    assert sampler.shares() == pytest.approx({"a": 0.51 / 1.52, "b": 1.01 / 1.52})


def test_adaptive_falls_back_to_informative_fraction_when_no_band_is_in_window():
    sampler = Adaptive(toy_pool(["a", "b"], 4), target=(0.1, 0.9), floor=0.0)
    _feed(sampler, 0, a=(0.95, 0.29, 4), b=(0.99, 0.09, 4))  # both too easy: the less easy one leads
    assert sampler.shares() == pytest.approx({"a": 0.75, "b": 0.25})


def test_window_keeps_last_observations_weighted_by_groups():
    sampler = Adaptive(toy_pool(["a"], 4), window=2)
    _feed(sampler, 0, a=(0.0, 0.0, 10))  # falls out of the window
    _feed(sampler, 1, a=(0.2, 1.0, 1))
    _feed(sampler, 2, a=(0.5, 0.5, 3))
    _feed(sampler, 3, a=(0.9, 0.1, 0))  # no groups: not an observation
    est = sampler.estimates()["a"]
    assert est["success"] == pytest.approx((0.2 * 1 + 0.5 * 3) / 4)
    assert est["nonzero_var_frac"] == pytest.approx((1.0 * 1 + 0.5 * 3) / 4)
    assert est["groups"] == 4


@pytest.fixture(scope="module")
def sim_runs():
    """200 steps of 16 prompts x G=8 on five bands whose success is logistic in step (centres 0..160)."""
    out = {}
    for kind in ("fixed", "adaptive"):
        for seed in (0, 1, 2):
            sampler = build_curriculum({"kind": kind}, toy_pool(DEFAULT_BANDS, 50))
            out[kind, seed] = simulate(sampler, DEFAULT_POLICY, 200, 16, 8, seed)
    return out


def _mean_band_index(rows):
    return sum(sum(i * r[f"curriculum/{b}/share"] for i, b in enumerate(DEFAULT_BANDS)) for r in rows) / len(rows)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_adaptive_beats_fixed_on_informative_groups(sim_runs, seed):
    fixed, adaptive = mean_informative(sim_runs["fixed", seed]), mean_informative(sim_runs["adaptive", seed])
    # measured 0.338/0.335/0.329 (fixed) and 0.736/0.733/0.728 (adaptive) for seeds 0/1/2
    assert 0.30 < fixed < 0.37
    assert adaptive > 0.70
    assert adaptive - fixed > 0.35


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_adaptive_moves_toward_harder_bands(sim_runs, seed):
    rows = sim_runs["adaptive", seed]
    early, mid, late = _mean_band_index(rows[10:40]), _mean_band_index(rows[80:100]), _mean_band_index(rows[160:200])
    # band index 0 = d1 (easiest) .. 4 = d5; measured about 0.86, 2.1, 3.48; fixed stays at 2.0
    assert early < 1.1 < 1.9 < mid < 2.4 < 3.3 < late
    assert _mean_band_index(sim_runs["fixed", seed]) == pytest.approx(2.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_adaptive_never_starves_a_band(sim_runs, seed):
    rows = sim_runs["adaptive", seed]
    assert min(r[f"curriculum/{b}/share"] for r in rows for b in DEFAULT_BANDS) >= 0.05 - 1e-12
    for b in DEFAULT_BANDS:  # floor 0.05 of 200 x 16 prompts is 160; realised counts stay near or above it
        assert sum(r.get(f"band/{b}/share", 0.0) * 16 for r in rows) > 0.8 * 160


def test_logistic_policy_values():
    p = logistic_policy({"a": 10}, width=5)
    assert (p("a", 10), p("a", 15), p("a", 5)) == pytest.approx((0.5, 1 / (1 + np.exp(-1)), 1 / (1 + np.exp(1))))


# ---------------------------------------------------------------- determinism and resume


@pytest.mark.parametrize(
    "cfg",
    [
        {"kind": "fixed"},
        {"kind": "schedule", "points": [[0, {"d1": 1}], [20, {"d5": 1}]]},
        {"kind": "adaptive", "window": 3},
    ],
)
def test_state_dict_round_trip_continues_identically(cfg):
    pool = toy_pool(DEFAULT_BANDS, 7)  # small bands, so the run crosses several epochs
    a = build_curriculum(cfg, pool)
    simulate(a, DEFAULT_POLICY, 15, 6, 4, seed=5)  # 15 steps in: mid-epoch, with a stats window
    state = json.loads(json.dumps(a.state_dict()))  # what a checkpoint stores
    b = build_curriculum(cfg, pool)
    b.load_state_dict(state)
    assert b.shares() == a.shares()
    rng_a, rng_b = random.Random(99), random.Random(99)  # the caller's rng is restored by the checkpoint
    for step in range(15, 40):
        ids_a = [p.id for p in a.next_batch(step, 6, rng_a)]
        ids_b = [p.id for p in b.next_batch(step, 6, rng_b)]
        assert ids_a == ids_b
        stat = {"reward": 0.5, "success": 0.5, "nonzero_var_frac": step % 3 / 2, "groups": 2}
        stats = {"d2": stat, "d4": stat}
        a.update(step, stats)
        b.update(step, stats)
        assert a.shares() == b.shares()


def test_state_is_json_even_when_stats_are_numpy():
    sampler = Adaptive(toy_pool(["a"], 4))
    sampler.update(
        np.int64(3),
        {"a": {k: np.float32(0.5) for k in ("reward", "success", "nonzero_var_frac")} | {"groups": np.int64(2)}},
    )
    assert json.loads(json.dumps(sampler.state_dict()))["history"] == {"a": [[3, 2, 0.5, 0.5, 0.5]]}


def test_load_state_dict_refuses_a_different_kind_or_pool():
    fixed = FixedMix(toy_pool(["a", "b"], 4))
    fixed.next_batch(0, 3, 0)
    with pytest.raises(ValueError, match="kind 'fixed'"):
        Adaptive(toy_pool(["a", "b"], 4)).load_state_dict(fixed.state_dict())
    with pytest.raises(ValueError, match="band 'a' had 4 problems, now 5"):
        FixedMix(toy_pool(["a"], 5) + toy_pool(["b"], 4)).load_state_dict(fixed.state_dict())
    with pytest.raises(ValueError, match="band 'b' holds other problems"):
        FixedMix(toy_pool(["a"], 4) + toy_pool(["b"], 4)[::-1]).load_state_dict(fixed.state_dict())


def test_same_seed_same_batches_other_seed_other_batches():
    def ids(seed):
        sampler = Adaptive(toy_pool(DEFAULT_BANDS, 30))
        return [p.id for step in range(5) for p in sampler.next_batch(step, 8, seed + step)]  # int seeds accepted

    assert ids(0) == ids(0)
    assert ids(0) != ids(1)


# ---------------------------------------------------------------- config


@pytest.mark.parametrize(
    "cfg, message",
    [
        (
            {"kind": "random"},
            "curriculum.kind: unknown curriculum 'random'; choose from fixed, schedule, adaptive, or package.module:attr",
        ),
        (
            {"kind": "adaptive", "targets": [0.1, 0.9]},
            "curriculum.targets: unknown key for kind 'adaptive'; choices: kind, target, floor, window",
        ),
        ({"kind": "fixed", "floor": 0.1}, "curriculum.floor: unknown key for kind 'fixed'"),
        (
            {"kind": "adaptive", "target": [0.9, 0.1]},
            r"curriculum.target: must be \[low, high\] with 0 <= low < high <= 1, got \[0.9, 0.1\]",
        ),
        ({"kind": "adaptive", "floor": 0.5}, r"curriculum.floor: must be in \[0, 1/3\]"),
        ({"kind": "adaptive", "window": 0}, "curriculum.window: must be an int >= 1"),
        ({"kind": "fixed", "weights": {"x": 1}}, "curriculum.weights: unknown band 'x'; bands: a, b, c"),
        ({"kind": "fixed", "weights": {"a": -1}}, "curriculum.weights.a: weight must be a number >= 0"),
        ({"kind": "fixed", "weights": {"a": 0}}, "at least one band needs weight > 0"),
        ({"kind": "schedule"}, "curriculum.points: required"),
        ({"kind": "schedule", "points": [[5, {"a": 1}], [5, {"b": 1}]]}, r"points\[1\]: step must be an int"),
    ],
)
def test_bad_config_names_key_and_choices(cfg, message):
    with pytest.raises(ConfigError, match=message):
        build_curriculum(cfg, toy_pool(["a", "b", "c"], 2))


def test_build_curriculum_kinds():
    pool = toy_pool(["a", "b"], 2)
    assert type(build_curriculum(None, pool)) is FixedMix
    built = build_curriculum({"kind": "adaptive", "target": [0.2, 0.8], "floor": 0.1}, pool)
    assert type(built) is Adaptive and (built.target, built.floor) == ((0.2, 0.8), 0.1)
    with pytest.raises(ConfigError, match="empty"):
        build_curriculum({"kind": "fixed"}, [])


# ---------------------------------------------------------------- metrics and plot


def test_band_stats_and_metrics_hand_computed():
    bands = np.array(["a", "a", "a", "a", "b", "b"])
    rewards = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    group_ids = np.array([0, 0, 1, 1, 2, 2])
    assert band_stats(bands, rewards, group_ids) == {
        "a": {"reward": 0.75, "success": 0.75, "nonzero_var_frac": 0.5, "groups": 2},
        "b": {"reward": 0.0, "success": 0.0, "nonzero_var_frac": 0.0, "groups": 1},
    }
    metrics = band_metrics(bands, rewards * 0.5, group_ids, success=rewards > 0)
    assert metrics == pytest.approx(
        {
            "band/a/reward": 0.375,
            "band/a/success": 0.75,
            "band/a/nonzero_var_frac": 0.5,
            "band/a/share": 2 / 3,
            "band/b/reward": 0.0,
            "band/b/success": 0.0,
            "band/b/nonzero_var_frac": 0.0,
            "band/b/share": 1 / 3,
        }
    )


def test_band_stats_refuses_a_group_across_bands_and_unknown_bands():
    with pytest.raises(ValueError, match="group 0 mixes bands 'a' and 'b'"):
        band_stats(["a", "b"], [1.0, 0.0], [0, 0])
    with pytest.raises(ValueError, match="unknown band 'z'"):
        FixedMix(toy_pool(["a"], 2)).update(0, {"z": {"reward": 0, "success": 0, "nonzero_var_frac": 0, "groups": 1}})


def test_plot_curriculum_writes_a_png(tmp_path, sim_runs):
    path = tmp_path / "curriculum.png"
    rows = sim_runs["adaptive", 0][:60] + [{"step": 60}]  # a row with no band keys must not break it
    assert plot_curriculum(rows, str(path)) == str(path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    assert [p.name for p in tmp_path.iterdir()] == ["curriculum.png"]  # no temp file left behind


def test_plot_band_order_is_natural_by_default():
    assert sorted(["d10", "d2", "d1", "hard", "easy"], key=natural_key) == ["d1", "d2", "d10", "easy", "hard"]


def test_a_setting_a_sampler_cannot_do_without_is_named_for_every_kind():
    """Required settings are read from the sampler's class (schedule's points; a plug-in's own), one message."""
    pool = toy_pool(["a", "b"], 4)
    with pytest.raises(ConfigError, match=r"^curriculum\.points: required for kind 'schedule'$"):
        build_curriculum({"kind": "schedule"}, pool)
    with pytest.raises(ConfigError, match=r"^curriculum\.band: required for kind 'registry_plugins:OneBandMix'$"):
        build_curriculum({"kind": "registry_plugins:OneBandMix"}, pool)
    sampler = build_curriculum({"kind": "registry_plugins:OneBandMix", "band": "b"}, pool)
    assert {p.band for p in sampler.next_batch(0, 6, random.Random(0))} == {"b"}
