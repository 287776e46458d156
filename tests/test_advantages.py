"""Advantages, dynamic sampling and overlong handling: hand-computed numbers and invariants."""

import math
import random

import pytest
import torch

from rlvr.algorithms.advantages import (
    OVERLONG_SHAPINGS,
    OverlongShaping,
    dynamic_sampling,
    group_advantages,
    nonzero_variance_frac,
    nonzero_variance_groups,
    overlong_soft_penalty,
    select_informative_groups,
    shaping_only_groups,
    truncated_rows,
)

# two groups of three: group 7 = [1, 0, 0] (mean 1/3, sample std sqrt(1/3) = 0.5773503),
# group 3 = [1, 1, 1] (constant); batch sample std of all six = sqrt((4/3) / 5) = 0.5163978
REWARDS = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0], dtype=torch.float64)
GROUPS = torch.tensor([7, 7, 7, 3, 3, 3])


@pytest.mark.parametrize(
    "scale, expected",
    [
        # (1 - 1/3) / 0.5773503 = 1.1547005 ; (0 - 1/3) / 0.5773503 = -0.5773503
        ("group", [1.1547005, -0.5773503, -0.5773503, 0, 0, 0]),
        # (2/3) / 0.5163978 = 1.2909944 ; (-1/3) / 0.5163978 = -0.6454972
        ("batch", [1.2909944, -0.6454972, -0.6454972, 0, 0, 0]),
        ("none", [0.6666667, -0.3333333, -0.3333333, 0, 0, 0]),
    ],
)
def test_group_advantages_hand_computed(scale, expected):
    adv = group_advantages(REWARDS, GROUPS, scale=scale, eps=0.0)
    assert torch.allclose(adv, torch.tensor(expected, dtype=torch.float64), atol=1e-6)


def test_eps_is_added_to_std():
    adv = group_advantages(REWARDS, GROUPS, eps=0.1)
    # (2/3) / (0.5773503 + 0.1) = 0.6666667 / 0.6773503 = 0.9842274
    assert adv[0].item() == pytest.approx(0.9842274, abs=1e-6)


def test_constant_and_singleton_groups_get_exactly_zero():
    # 0.1 * 3 / 3 != 0.1 in floating point: the mean must not leak a tiny advantage
    rewards = torch.tensor([0.1, 0.1, 0.1, 0.7, 0.3])
    for scale in ("group", "batch", "none"):
        adv = group_advantages(rewards, [0, 0, 0, 1, 2], scale=scale)
        assert adv.tolist()[:3] == [0.0, 0.0, 0.0]
        assert adv[3].item() == 0.0 and adv[4].item() == 0.0  # groups of one row


def test_int_rewards_and_lists_are_accepted():
    adv = group_advantages([1, 0], [0, 0], eps=0.0)
    # mean 0.5, sample std sqrt(0.5) = 0.7071068
    assert adv.dtype == torch.float32
    assert adv.tolist() == pytest.approx([0.7071068, -0.7071068], abs=1e-6)


def _loop_advantages(rewards, groups, scale, eps):
    """The plain-Python reference: one group at a time."""
    out = [0.0] * len(rewards)
    n = len(rewards)
    mean_all = sum(rewards) / n
    std_all = math.sqrt(sum((r - mean_all) ** 2 for r in rewards) / (n - 1)) if n > 1 else 0.0
    for g in set(groups):
        rows = [i for i in range(n) if groups[i] == g]
        vals = [rewards[i] for i in rows]
        if len(set(vals)) == 1:
            continue
        mean = sum(vals) / len(vals)
        std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))
        for i in rows:
            denom = {"group": std + eps, "batch": std_all + eps, "none": 1.0}[scale]
            out[i] = (rewards[i] - mean) / denom
    return out


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_vectorised_matches_python_loop_on_random_groups(scale):
    rng = random.Random(0)
    for _ in range(30):
        groups = [g for g in range(rng.randint(1, 6)) for _ in range(rng.randint(1, 5))]
        rng.shuffle(groups)  # rows of a group need not be contiguous
        groups = [g * 13 - 5 for g in groups]  # arbitrary, negative, sparse ids
        if rng.random() < 0.5:
            rewards = [float(rng.randint(0, 1)) for _ in groups]
        else:
            rewards = [rng.uniform(-2, 2) for _ in groups]
        got = group_advantages(torch.tensor(rewards, dtype=torch.float64), torch.tensor(groups), scale, 1e-4)
        assert got.tolist() == pytest.approx(_loop_advantages(rewards, groups, scale, 1e-4), abs=1e-9)


def test_nonzero_variance_mask_and_fraction():
    rewards = [1, 0, 1, 1, 0.5, 2, 2]
    groups = [0, 0, 1, 1, 2, 3, 3]  # informative: group 0 only; 2 is a singleton
    mask = nonzero_variance_groups(rewards, groups)
    assert mask.tolist() == [True, True, False, False, False, False, False]
    # per group, not per row: 1 of 4
    assert nonzero_variance_frac(rewards, groups).item() == pytest.approx(0.25)


# three groups of four under the math grader (correct 1.0 + format 0.1): group 0 has one solved sample (its correct
# term varies), group 1 none (only the format term varies: three boxed wrong answers and one without a box), group 2
# none and no box anywhere (no variance at all)
SHAPED = torch.tensor([1.1, 0.1, 0.0, 0.1, 0.1, 0.0, 0.1, 0.1, 0.0, 0.0, 0.0, 0.0])
GRADED = torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])


def test_a_group_whose_only_variance_is_shaping_is_found_and_weighs_as_much_as_a_solved_one():
    """Group 1 is shaping-only. Its deviations from the mean (0.025, -0.075, 0.025, 0.025: |sum| 0.15) are a tenth of
    group 0's (0.775, -0.225, -0.325, -0.225: 1.55), but divided by the group's own std (0.05 against 0.5188) they
    weigh the same: 0.15 / 0.0501 = 2.994 against 1.55 / 0.5189 = 2.987, half the step's advantage. Divided by the
    batch's std (algorithm.adv_scale: batch) every group keeps its deviations' proportion: 0.15 / 1.70 = 0.088."""
    from rlvr.training.metrics import shaping_figures
    from test_update import make_batch

    groups = torch.arange(12) // 4
    assert shaping_only_groups(SHAPED, GRADED, groups).tolist() == [False] * 4 + [True] * 4 + [False] * 4
    for scale, share in (("group", 2.994012 / (2.994012 + 2.987015)), ("batch", 0.15 / 1.70)):
        batch = make_batch(group_advantages(SHAPED, groups, scale=scale).tolist())
        batch.group_ids, batch.rewards, batch.mask = groups, SHAPED, torch.ones(12, 6)
        batch.terms = {"correct": GRADED.tolist(), "format": [1.0, 1, 0, 1, 1, 0, 1, 1, 0, 0, 0, 0]}
        got = shaping_figures(batch)
        assert got["groups/shaping_only_frac"] == pytest.approx(1 / 3)
        assert got["adv/shaping_only_share"] == pytest.approx(share, abs=1e-5)
        batch.mask[4:8] = 0.0  # the shaping-only group trains no token: none of the mass is its
        assert shaping_figures(batch)["adv/shaping_only_share"] == 0.0
    batch.terms = {}  # an environment's reward: no terms, no figure
    assert shaping_figures(batch) == {}


def test_the_report_warns_when_shaping_carried_the_update():
    """Mean share over the steps that measured it: (0.5 + 0.2) / 2 = 35% > 25% warns, naming the groups' mean share
    (0.25 + 0.5) / 2 = 38%; 15% does not; a run without the figure (an environment's reward) does not."""
    from rlvr.evaluation.report import shaping_warning

    rows = [
        {"step": 0, "adv/shaping_only_share": 0.5, "groups/shaping_only_frac": 0.25},
        {"step": 1, "adv/shaping_only_share": 0.2, "groups/shaping_only_frac": 0.5},
        {"step": 2},
    ]
    text = shaping_warning(rows)
    assert text.startswith("35% of the advantage (mean over 2 steps) came from groups where no sample was solved")
    assert "(38% of the groups)" in text and "algorithm.adv_scale: batch" in text
    assert shaping_warning([{"adv/shaping_only_share": 0.1, "groups/shaping_only_frac": 0.1}] * 2) is None
    assert shaping_warning([{"step": 0}]) is None


def test_select_informative_groups_keeps_first_groups():
    rewards = torch.tensor([1.0, 0, 0, 0, 1, 0, 0, 1])
    groups = torch.tensor([9, 9, 4, 4, 2, 2, 5, 5])  # 9 and 2 and 5 informative, 4 constant
    assert select_informative_groups(rewards, groups).tolist() == [1, 1, 0, 0, 1, 1, 1, 1]
    # first appearance order: 9, then 2
    assert select_informative_groups(rewards, groups, max_groups=2).tolist() == [1, 1, 0, 0, 1, 1, 0, 0]
    assert select_informative_groups(rewards, groups, max_groups=0).tolist() == [0] * 8


def test_dynamic_sampling_never_returns_zero_variance_groups():
    gen = torch.Generator().manual_seed(0)
    rounds_data = []

    def draw(i):
        # 4 prompts x 4 samples per round, mostly all-correct or all-wrong (p far from 1/2)
        p = torch.rand(4, 1, generator=gen) ** 4
        rewards = (torch.rand(4, 4, generator=gen) < p).double().flatten()
        groups = torch.arange(4).repeat_interleave(4) + 100 * i
        rounds_data.append((rewards, groups))
        return rewards, groups

    for want in (1, 3, 6, 50):
        rounds_data.clear()
        kept, stats = dynamic_sampling(draw, want_groups=want, max_rounds=5)
        total = 0
        for rnd, rows in kept:
            rewards, groups = rounds_data[rnd]
            for g in groups[rows].unique():
                vals = rewards[groups == g]
                assert (groups[rows] == g).sum() == 4  # whole groups only
                assert vals.max() > vals.min()
                total += 1
        assert total == stats["dynamic_sampling/kept_groups"] <= want
        assert stats["dynamic_sampling/generated_groups"] == 4 * stats["dynamic_sampling/rounds"]
        assert stats["dynamic_sampling/rounds"] <= 5
        if total < want:
            assert stats["dynamic_sampling/rounds"] == 5  # stopped by the round limit only


def test_dynamic_sampling_stops_once_full():
    rewards, groups = torch.tensor([1.0, 0, 1, 0]), torch.tensor([0, 0, 1, 1])
    kept, stats = dynamic_sampling(lambda i: (rewards, groups), want_groups=3, max_rounds=10)
    assert [r for r, _ in kept] == [0, 1]
    assert kept[1][1].tolist() == [0, 1]  # only one more group was needed
    assert stats == {
        "dynamic_sampling/generated_groups": 4,
        "dynamic_sampling/kept_groups": 3,
        "dynamic_sampling/rounds": 2,
    }


@pytest.mark.parametrize(
    "length, max_len, buffer, penalty",
    [
        (0, 20, 4, 0.0),
        (16, 20, 4, 0.0),  # exactly at Lmax - Lc: still free
        (17, 20, 4, -0.25),  # (16 - 17) / 4
        (18, 20, 4, -0.5),
        (20, 20, 4, -1.0),  # at the budget: full punishment
        (25, 20, 4, -1.0),  # beyond it: clamped
        (20, 20, 0, 0.0),  # no buffer: a cliff just past max_len
        (21, 20, 0, -1.0),
        (5, 10, 10, -0.5),  # the whole budget is the buffer
    ],
)
def test_overlong_soft_penalty(length, max_len, buffer, penalty):
    assert overlong_soft_penalty([length], max_len, buffer).item() == pytest.approx(penalty)


def test_overlong_soft_penalty_rejects_bad_buffer():
    with pytest.raises(ValueError, match="buffer"):
        overlong_soft_penalty([1], 10, 11)


def test_overlong_filter_keeps_truncated_rows_out_of_the_loss():
    """DAPO's overlong filtering as the step applies it (rlvr.training.batch.overlong_shaping): a row cut off at the
    limit leaves the loss, its reward untouched (it still counts in its group's statistics); a fault row stays out."""
    from rlvr.algorithms.presets import get_preset, with_overrides
    from rlvr.training.batch import overlong_shaping

    assert truncated_rows(["stop", "length", "stop"]).tolist() == [False, True, False]
    algo = with_overrides(get_preset("grpo"), {"overlong": "filter"})
    rewards, keep = torch.tensor([1.0, 0.0, 1.0, 0.0]), torch.tensor([1.0, 1.0, 1.0, 0.0])
    finish = ["stop", "length", "stop", "length"]
    out_rewards, out_keep = overlong_shaping(algo, rewards, keep, torch.tensor([5, 8, 7, 8]), finish, 8)
    assert out_keep.tolist() == [1.0, 0.0, 1.0, 0.0] and out_rewards.tolist() == [1.0, 0.0, 1.0, 0.0]
    none_rewards, none_keep = overlong_shaping(get_preset("grpo"), rewards, keep, torch.tensor([5, 8, 7, 8]), finish, 8)
    assert none_keep.tolist() == keep.tolist() and none_rewards.tolist() == rewards.tolist()


def _cap_at_half(rewards, keep, lengths, finish, limit, buffer):
    """A plug-in overlong shaping (algorithm.overlong: test_advantages:_cap_at_half): rewards capped at 0.5."""
    return rewards.clamp(max=0.5), keep


MASKING = OverlongShaping(_cap_at_half, masks_truncated=True)  # the same, declaring that it masks truncated rows


def test_an_overlong_shaping_says_whether_it_masks_truncated_rows():
    """What the TRL recipe converter asks of algorithm.overlong (mask_truncated_completions), from the entry."""
    assert {n: OVERLONG_SHAPINGS.get(n).masks_truncated for n in OVERLONG_SHAPINGS} == {
        "none": False,
        "filter": True,
        "soft": False,
    }
    plugin = OVERLONG_SHAPINGS.get("test_advantages:_cap_at_half")  # a bare function: masks nothing
    assert plugin == OverlongShaping(_cap_at_half) and not plugin.masks_truncated
    assert OVERLONG_SHAPINGS.get("test_advantages:MASKING").masks_truncated
    rewards, keep = plugin(
        torch.tensor([1.0, 0.25]), torch.tensor([1.0, 1.0]), torch.tensor([3, 8]), ["stop"] * 2, 8, 2
    )
    assert rewards.tolist() == [0.5, 0.25] and keep.tolist() == [1.0, 1.0]


# A plug-in scale (tests/scale_plugin.py) divides by the range of the whole batch's rewards: it gets them as the
# built-in "batch" does, in one process (its own rewards: range 1 - 0 = 1) and under data parallel (every rank's).
def test_a_plugin_scale_reads_the_batch_rewards_in_one_process():
    adv = group_advantages(REWARDS, GROUPS, scale="scale_plugin:batch_range", eps=0.0)
    assert torch.allclose(adv, torch.tensor([2 / 3, -1 / 3, -1 / 3, 0, 0, 0], dtype=torch.float64), atol=1e-7)


class _TwoRanks:
    """Rank 0 of two; the other rank's rewards are [0, 3], so the global batch's range is 3 - 0 = 3."""

    world = 2

    def __init__(self):
        self.gathered = 0

    def all_gather(self, obj):
        self.gathered += 1
        return [obj, [0.0, 3.0]]


class _Batch:
    rewards, group_ids = REWARDS, GROUPS

    def __len__(self):
        return len(REWARDS)


@pytest.mark.parametrize(
    "scale, expected, gathers",
    [
        # (1 - 1/3) / 3 = 0.2222222 ; (0 - 1/3) / 3 = -0.1111111: the other rank's rewards widen the range
        ("scale_plugin:batch_range", [0.2222222, -0.1111111, -0.1111111, 0, 0, 0], 1),
        # the global std of [1, 0, 0, 1, 1, 1, 0, 3]: mean 7/8, sum of squares 6.875, / 7 -> std 0.9910312
        ("batch", [0.6727000, -0.3363500, -0.3363500, 0, 0, 0], 1),
        ("group", [1.1547005, -0.5773503, -0.5773503, 0, 0, 0], 0),  # reads no batch: no collective
    ],
)
def test_under_data_parallel_a_scale_that_reads_the_batch_gets_every_ranks_rewards(scale, expected, gathers):
    from types import SimpleNamespace

    from rlvr.training.batch import _advantages

    comm = _TwoRanks()
    adv = _advantages(_Batch(), SimpleNamespace(adv_scale=scale, adv_eps=0.0), comm)
    assert torch.allclose(adv, torch.tensor(expected, dtype=torch.float64), atol=1e-6)
    assert comm.gathered == gathers
