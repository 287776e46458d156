"""The default task: deterministic by seed, bands present, ids stable, splits disjoint, golds right."""

import re

from rlvr.tasks import load_task
from rlvr.tasks.arithmetic import SPLIT_BUCKETS, generate, split_of


def test_deterministic_by_seed():
    a = [(p.id, p.prompt, p.answer) for p in generate(seed=3, per_band=50)]
    b = [(p.id, p.prompt, p.answer) for p in generate(seed=3, per_band=50)]
    c = [(p.id, p.prompt, p.answer) for p in generate(seed=4, per_band=50)]
    assert a == b and a != c


def test_splits_disjoint_and_cover_everything():
    task = load_task("arithmetic", seed=0, per_band=300)
    ids = {s: {p.id for p in task.problems(s)} for s in ("train", "validation", "heldout")}
    assert (
        not ids["train"] & ids["heldout"]
        and not ids["train"] & ids["validation"]
        and not ids["validation"] & ids["heldout"]
    )
    assert sum(len(v) for v in ids.values()) == 900
    # roughly 80 / 10 / 10 (by fact: the 1-digit band has few facts, so the split is coarser)
    assert 0.70 < len(ids["train"]) / 900 < 0.90


def test_split_depends_on_the_fact_only_so_seeds_and_wordings_agree():
    task = load_task("arithmetic", seed=0, per_band=600)
    split_by_fact = {}
    for split in ("train", "validation", "heldout"):
        for p in task.problems(split):
            split_by_fact.setdefault(p.meta["fact"], set()).add(split)
    # every fact lives in exactly one split, whatever story it was told in
    assert all(len(s) == 1 for s in split_by_fact.values())
    assert sum(len(r) for r in SPLIT_BUCKETS.values()) == 100
    for seed in range(3):
        for p in generate(seed=seed, per_band=100):
            if p.meta["fact"] in split_by_fact:
                assert split_of(p.meta["fact"]) in split_by_fact[p.meta["fact"]]


def test_heldout_passes_the_contamination_check():
    from rlvr.tasks.hygiene import find_contamination

    task = load_task("arithmetic", seed=0, per_band=400)
    assert find_contamination(task.problems("train"), task.problems("heldout")) == []


def test_bands_present_in_every_split():
    task = load_task("arithmetic", seed=0, per_band=300)
    for split in ("train", "validation", "heldout"):
        assert {p.band for p in task.problems(split)} == {"1-digit", "2-digit", "3-digit"}


def test_gold_answers_are_right():
    for p in generate(seed=1, per_band=100, bands=("1-digit", "2-digit", "3-digit", "mixed")):
        nums = [int(x) for x in re.findall(r"\d+", p.prompt)]
        op = p.meta["op"]
        expected = {"+": nums[0] + nums[1], "-": nums[0] - nums[1], "*": nums[0] * nums[1]}[op]
        if p.band == "mixed":
            expected += nums[2]
        assert int(p.answer) == expected, p
        assert int(p.answer) >= 0
        digits = {"1-digit": 1, "2-digit": 2, "3-digit": 3, "mixed": 2}[p.band]
        assert max(len(str(n)) for n in nums[:2]) <= digits


def test_messages_use_system_prompt_and_one_shot():
    task = load_task("arithmetic", seed=0, per_band=10)
    p = task.problems("train")[0]
    msgs = task.messages(p)
    assert msgs[0]["role"] == "system" and "\\boxed{}" in msgs[0]["content"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[-1]["content"] == p.prompt
    assert [m["role"] for m in load_task("arithmetic", per_band=10, one_shot=False).messages(p)] == ["system", "user"]
