"""A procedural code task a small model can learn: write a one-line function from input/output examples.

Problems are drawn from families (data, not branches) in three bands: `easy` (one arithmetic step),
`medium` (two steps or a string op), `hard` (a list comprehension or a condition). Each problem shows
three examples and is graded by python_tests on those plus four hidden inputs. Ids name the family and
parameters (e.g. "code-proc/add/7"), so they are stable across runs and machines; the split is by a hash
of the id (20% held out), so train and held-out never share a problem.
"""

from __future__ import annotations

import hashlib
import random

from rlvr.tasks.base import Problem

# family: (band, body template with {k}, argument kind, k range)
FAMILIES = {
    "add": ("easy", "x + {k}", "int", (1, 20)),
    "mul": ("easy", "x * {k}", "int", (2, 12)),
    "sub": ("easy", "x - {k}", "int", (1, 20)),
    "affine": ("medium", "x * {k} + 1", "int", (2, 9)),
    "square_plus": ("medium", "x * x + {k}", "int", (1, 9)),
    "repeat": ("medium", "s * {k}", "str", (2, 4)),
    "upper_tail": ("medium", "s[{k}:].upper()", "str", (1, 3)),
    "evens_times": ("hard", "[v * {k} for v in xs if v % 2 == 0]", "list", (2, 5)),
    "count_above": ("hard", "sum(1 for v in xs if v > {k})", "list", (0, 6)),
    "clamp": ("hard", "min(max(x, -{k}), {k})", "int", (2, 9)),
}
ARG = {"int": "x", "str": "s", "list": "xs"}
PROMPT = (
    "Write a Python function `f({arg})` whose body is one line, such that:\n{examples}\n"
    "Answer with the function in one ```python code block."
)
HELDOUT_PERCENT = 20


def _inputs(kind: str, rng: random.Random, n: int) -> list:
    if kind == "int":
        return [rng.randint(-20, 20) for _ in range(n)]
    if kind == "str":
        return ["".join(rng.choice("abcdefgh") for _ in range(rng.randint(3, 6))) for _ in range(n)]
    return [[rng.randint(0, 9) for _ in range(rng.randint(2, 6))] for _ in range(n)]


def make_problem(family: str, k: int) -> Problem:
    """One problem; its examples and hidden inputs depend only on (family, k)."""
    band, body, kind, _ = FAMILIES[family]
    arg, code = ARG[kind], body.format(k=k)
    fn = eval(f"lambda {arg}: {code}")  # our own template, never model output
    pid = f"code-proc/{family}/{k}"
    rng = random.Random(pid)
    shown, hidden = _inputs(kind, rng, 3), _inputs(kind, rng, 4)
    examples = "\n".join(f"f({v!r}) == {fn(v)!r}" for v in shown)
    tests = [f"assert f({v!r}) == {fn(v)!r}" for v in shown + hidden]
    return Problem(
        id=pid,
        prompt=PROMPT.format(arg=arg, examples=examples),
        tests=tests,
        band=band,
        meta={"entry_point": "f", "solution": f"def f({arg}):\n    return {code}\n"},
    )


def split_of(problem_id: str) -> str:
    """ "heldout" for about HELDOUT_PERCENT% of ids (by hash), else "train"; a pure function of the id."""
    h = int(hashlib.sha256(problem_id.encode()).hexdigest()[:8], 16)
    return "heldout" if h % 100 < HELDOUT_PERCENT else "train"


def all_problems() -> list[Problem]:
    """Every (family, k) problem, in a fixed order."""
    return [make_problem(f, k) for f, (_, _, _, (lo, hi)) in FAMILIES.items() for k in range(lo, hi + 1)]


def load_code_procedural(split: str = "train", n: int | None = None, seed: int = 0) -> list[Problem]:
    """The problems of `split` ("train" or "heldout"), shuffled by `seed`, the first n of them."""
    problems = [p for p in all_problems() if split_of(p.id) == split]
    random.Random(seed).shuffle(problems)
    return problems[:n] if n is not None else problems
