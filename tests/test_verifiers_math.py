"""Math verifier: one case per line with why (first basic table; hardened below)."""

import pytest

from rlvr.tasks.base import Problem
from rlvr.verifiers.math import MathVerifier

CASES = [
    # completion, gold, status, why
    ("The answer is \\boxed{42}.", "42", "correct", "plain boxed integer"),
    ("\\boxed{41}", "42", "wrong", "different integer"),
    ("42", "42", "no_answer", "unboxed final number does not count with require_boxed"),
    ("", "42", "no_answer", "empty output"),
    ("\\boxed{3} or \\boxed{4}", "4", "multiple_answers", "adjacent hedged boxes"),
    ("\\boxed{\\frac{1}{2}}", "0.5", "correct", "fraction equals decimal"),
]


@pytest.mark.parametrize("completion,gold,status,why", CASES)
def test_math_table(completion, gold, status, why):
    v = MathVerifier().score(completion, Problem("p", "q", gold))
    assert v.status == status, why
    assert v.reward == (1.0 if status == "correct" else 0.0)
