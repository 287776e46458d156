"""python_tests and stdio: table-driven honest cases, then the hostile suite (one test per attack)."""

import os

import pytest

from rlvr.tasks.base import Problem
from rlvr.verifiers.code import PythonTestsVerifier, StdioVerifier, extract_code, normalise_output, score_code_batch
from rlvr.verifiers.code_attacks import ATTACKS, TARGET, host_damage, hostile_suite
from rlvr.verifiers.sandbox import Limits, sandbox_processes

FAST = Limits(cpu_s=2, wall_s=2.5, memory_mb=512, processes=8)
SQ_CHECK = Problem(
    "sq-check",
    "p",
    tests="def check(candidate):\n    assert candidate(3) == 9\n    assert candidate(0) == 0\n",
    meta={"entry_point": "sq"},
)

# (completion, problem, status, reward, passed) -- why in the comment
HONEST = [
    ("```python\ndef sq(x):\n    return x * x\n```", TARGET, "correct", 1.0, 2),  # right, fenced
    ("def sq(x):\n    return x * x\n", TARGET, "correct", 1.0, 2),  # right, bare code
    (
        "```python\ndef sq(x): return 0\n```\nthen\n```python\ndef sq(x): return x*x\n```",
        TARGET,
        "correct",
        1.0,
        2,
    ),  # last block wins
    ("def sq(x):\n    return 9 if x == 3 else 0\n", TARGET, "wrong", 0.0, 1),  # half right: reward 0, fraction 1/2
    ("def sq(x):\n    return x * x\n", SQ_CHECK, "correct", 1.0, 1),  # HumanEval check(candidate) form
    ("def sq(x):\n    return x + x\n", SQ_CHECK, "wrong", 0.0, 0),  # passes 0 == 0 only: the check fails whole
    ("def sq(x):\n    raise ValueError('no')\n", TARGET, "wrong", 0.0, 0),  # raising is failing
    ("def sq(x) return", TARGET, "no_answer", 0.0, 0),  # prose that is not code
    ("```python\ndef sq(x:\n```", TARGET, "wrong", 0.0, 0),  # a block with a syntax error is an answer that fails
    ("", TARGET, "no_answer", 0.0, 0),
    ("def sq(x):\n    return x * x\n", Problem("e", "p", tests=[], meta={"entry_point": "sq"}), "invalid_gold", 0.0, 0),
    ("def sq(x):\n    return x * x\n", Problem("b", "p", tests=["assert sq(3) =="]), "invalid_gold", 0.0, 0),
]


@pytest.fixture(scope="module")
def honest_outcomes():
    verifier = PythonTestsVerifier(FAST)
    return [verifier.run(c, p) for c, p, *_ in HONEST]


@pytest.mark.parametrize("i", range(len(HONEST)))
def test_honest_table(i, honest_outcomes):
    _, _, status, reward, passed = HONEST[i]
    out = honest_outcomes[i]
    assert (out.verdict.status, out.verdict.reward, out.passed) == (status, reward, passed), out.verdict.detail


def test_fraction_is_a_separate_term(honest_outcomes):
    assert honest_outcomes[3].fraction == 0.5 and honest_outcomes[3].verdict.reward == 0.0
    assert honest_outcomes[0].fraction == 1.0


@pytest.mark.parametrize(
    "text,code",
    [
        ("```py\nA\n```\n```python\nB\n```", "B\n"),
        ("```\nA\n```", "A\n"),
        ("```python\nA\n```\n```\nB\n```", "A\n"),  # a python block beats an untagged one
        ("just words here", None),
    ],
)
def test_extract_code(text, code):
    assert extract_code(text) == code


def test_empty_test_list_is_invalid_gold_never_a_pass():
    verdict = PythonTestsVerifier(FAST).score("def f(): pass", Problem("e", "p", tests=[]))
    assert (verdict.status, verdict.reward) == ("invalid_gold", 0.0)


STDIO = Problem("echo2", "p", tests=[{"stdin": "3\n", "stdout": "3\n6\n"}, {"stdin": "5\n", "stdout": "5 \n10\n\n"}])


@pytest.mark.parametrize(
    "code,status",
    [
        ("n = int(input())\nprint(n)\nprint(2 * n)", "correct"),
        ("n = int(input())\nprint(n)", "wrong"),  # only the first expected line
        ("n = int(input())\nprint(n)\nprint(2 * n)\nprint('extra')", "wrong"),
        ("n = int(input())\nprint(f'  {n}  ')\nprint(2 * n, end='')", "correct"),  # whitespace normalised
        ("import time\ntime.sleep(60)", "timeout"),
    ],
)
def test_stdio(code, status):
    verdict = StdioVerifier(FAST).score(f"```python\n{code}\n```", STDIO)
    assert verdict.status == status and verdict.reward == (1.0 if status == "correct" else 0.0)


def test_normalise_output():
    assert normalise_output("a  b \n\n c\n\n\n") == ["a b", "", "c"]


def test_batch_keeps_order_and_turns_failures_into_error_verdicts():
    class Broken:
        name = "broken"

        def score(self, completion, problem):
            raise RuntimeError("boom")

    verdicts = score_code_batch(
        PythonTestsVerifier(FAST), ["def sq(x): return x*x", "def sq(x): return 1"], [TARGET, TARGET], workers=2
    )
    assert [v.reward for v in verdicts] == [1.0, 0.0]
    assert [v.status for v in score_code_batch(Broken(), ["x"], [TARGET])] == ["error"]


# --- the hostile suite: every attack scores 0 and leaves the host as it was ---


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    attacks, listener = hostile_suite(str(tmp_path_factory.mktemp("hostile")))
    verdicts = score_code_batch(
        PythonTestsVerifier(FAST), [a.completion for a in attacks], [a.problem for a in attacks], workers=4
    )
    yield {a.name: (a, v) for a, v in zip(attacks, verdicts)}, listener
    listener.close()


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_scores_zero_and_host_untouched(name, hostile):
    results, listener = hostile
    attack, verdict = results[name]
    assert verdict.reward == 0.0 and verdict.status in ("wrong", "timeout"), verdict
    assert host_damage(attack, listener) == []
    assert sandbox_processes() == []
    os.kill(os.getpid(), 0)  # this process is alive


def test_hostile_suite_covers_the_issue_list():
    assert len(ATTACKS) == 20


# ---- golds that cannot fail are bad golds ------------------------------------------------------------------

SOLVED = "```python\ndef sq(x):\n    return x * x\n```"


@pytest.mark.parametrize(
    "tests, why",
    [
        ({"check": "def check(candidate):\n    candidate(3)\n", "entry_point": "sq"}, "a check that asserts nothing"),
        (
            {"check": "def check(candidate):\n    assert 2 + 2 == 4\n", "entry_point": "sq"},
            "never calls the entry point",
        ),
        (["assert True"], "asserts that never call the function"),
    ],
)
def test_tests_a_do_nothing_candidate_passes_are_invalid_gold(tests, why):
    v = PythonTestsVerifier().score(SOLVED, Problem("bad", "Write sq(x).", tests=tests, meta={"entry_point": "sq"}))
    assert (v.status, v.reward) == ("invalid_gold", 0.0), why
    assert "does nothing" in v.detail


def test_tests_that_can_fail_are_used_and_the_finding_is_cached(monkeypatch):
    from rlvr.verifiers import code

    runs = []
    real = code._run_pair
    monkeypatch.setattr(
        code, "_run_pair", lambda source, spec, limits: runs.append(source) or real(source, spec, limits)
    )
    tests = {"check": "def check(candidate):\n    assert candidate(5) == 25\n", "entry_point": "sq"}
    problem = Problem("ok", "Write sq(x).", tests=tests)
    verifier = PythonTestsVerifier()
    assert verifier.score(SOLVED, problem).status == "correct"
    assert verifier.score("```python\ndef sq(x):\n    return 0\n```", problem).status == "wrong"
    # one do-nothing run for the problem, then one run per completion
    assert len(runs) == 3 and "return None" in runs[0] and "return None" not in runs[1] + runs[2]


def test_stdio_cases_that_expect_no_output_are_invalid_gold():
    problem = Problem("s", "Print nothing.", tests=[{"stdin": "1\n", "stdout": ""}, {"stdin": "2\n", "stdout": "\n"}])
    v = StdioVerifier().score("```python\nprint(input())\n```", problem)
    assert (v.status, v.reward) == ("invalid_gold", 0.0)


def test_the_code_audit_refuses_every_gold_that_cannot_fail(capsys):
    import argparse

    from rlvr.verifiers.code_commands import _audit_bad_golds

    assert _audit_bad_golds(argparse.Namespace(timeout=5.0)) is True
    assert "3/3 golds that cannot fail refused (invalid_gold)" in capsys.readouterr().out
