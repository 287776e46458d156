import collections

from rlvr.tasks.code_procedural import FAMILIES, all_problems, load_code_procedural, make_problem, split_of
from rlvr.verifiers.code import PythonTestsVerifier, score_code_batch


def test_ids_stable_and_unique():
    problems = all_problems()
    assert len(problems) == sum(hi - lo + 1 for _, _, _, (lo, hi) in FAMILIES.values()) == 93
    assert len({p.id for p in problems}) == len(problems)
    assert make_problem("add", 7) == make_problem("add", 7)
    assert make_problem("add", 7).tests[0].startswith("assert f(")


def test_three_bands():
    assert collections.Counter(p.band for p in all_problems()) == {"easy": 51, "medium": 23, "hard": 19}


def test_split_never_overlaps_and_is_seed_independent():
    train = {p.id for p in load_code_procedural("train", seed=1)}
    held = {p.id for p in load_code_procedural("heldout", seed=2)}
    assert not train & held and len(train) + len(held) == 93
    assert held == {p.id for p in load_code_procedural("heldout", seed=3)}
    assert all(split_of(i) == "heldout" for i in held)
    assert [p.id for p in load_code_procedural("train", n=5, seed=1)] == [
        p.id for p in load_code_procedural("train", n=5, seed=1)
    ]


def test_reference_solutions_pass_and_a_constant_fails():
    problems = [make_problem(f, lo) for f, (_, _, _, (lo, _)) in FAMILIES.items()]
    verdicts = score_code_batch(PythonTestsVerifier(), [p.meta["solution"] for p in problems], problems, workers=4)
    assert [v.reward for v in verdicts] == [1.0] * len(problems)
    wrong = score_code_batch(PythonTestsVerifier(), ["def f(x):\n    return 0\n"] * 3, problems[:3], workers=3)
    assert [v.reward for v in wrong] == [0.0] * 3
