"""Code verifiers: hidden Python tests (`python_tests`) and stdin/stdout cases (`stdio`), both sandboxed.

How `python_tests` cannot be spoofed: the candidate's code and the hidden tests run in two different
sandboxed processes under two different random uids. The judge process holds the tests (sent on its
stdin, never written where the candidate can read), calls the candidate through a proxy over a pipe,
decodes every returned value into fresh builtin objects (no pickle, no candidate-made objects), does
every comparison itself, and reports on a copy of its stdout taken before any test code ran. Nothing
the candidate does in its own process (exit codes, printing "PASS", patching builtins, AssertionError,
sys.modules or the runner loop) reaches that report; a dead or silent candidate fails every test left.
"""

from __future__ import annotations

import ast
import json
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from rlvr.verifiers.base import Verdict
from rlvr.verifiers.sandbox import IN_PROCESS, Limits, run_sandboxed

RUNTIME = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_code_runtime")
FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
PYTHON_TAGS = {"python", "py", "python3"}
DEFAULT_LIMITS = Limits(cpu_s=5, wall_s=6.0, memory_mb=512, processes=8)


def _runtime_file(name: str) -> str:
    with open(os.path.join(RUNTIME, name)) as f:
        return f.read()


def extract_code(text: str, setup: str = "") -> str | None:
    """The last ```python block; else the last untagged block; else the bare text when it compiles
    (alone or after `setup`, for a function body). None when there is no code."""
    blocks = FENCE.findall(text or "")
    for wanted in (PYTHON_TAGS, {""}):
        tagged = [body for tag, body in blocks if tag.lower() in wanted]
        if tagged:
            return tagged[-1] if tagged[-1].strip() else None
    if blocks or not (text or "").strip():
        return None
    for source in (text, setup + "\n" + text):
        try:
            ast.parse(source)
            return text
        except (SyntaxError, ValueError):
            continue
    return None


def test_spec(tests, entry_point: str | None) -> dict | None:
    """Normalise a problem's hidden tests to the judge's spec, or None when there are none.

    tests: a `check(candidate)` source (HumanEval form, needs entry_point); a dict with "check" or
    "asserts" and optional "setup" and "entry_point"; or a list of assert statements.
    """
    if isinstance(tests, str):
        tests = {"check": tests}
    elif isinstance(tests, (list, tuple)):
        tests = {"asserts": list(tests)}
    if not isinstance(tests, dict):
        return None
    entry = tests.get("entry_point") or entry_point
    spec = {"setup": tests.get("setup") or "", "entry_point": entry}
    if isinstance(tests.get("check"), str) and tests["check"].strip() and entry:
        return dict(spec, check=tests["check"])
    asserts = [a for a in tests.get("asserts") or [] if isinstance(a, str) and a.strip()]
    return dict(spec, asserts=asserts) if asserts else None


@dataclass(frozen=True)
class CodeOutcome:
    """A verdict plus the tests passed: `fraction` is the optional partial-credit term (never the reward)."""

    verdict: Verdict
    passed: int
    total: int

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.total else 0.0


def do_nothing(spec: dict) -> str:
    """A candidate that computes nothing: the entry point returns None (or no code at all)."""
    entry = spec.get("entry_point")
    return f"def {entry}(*args, **kwargs):\n    return None\n" if entry else "pass\n"


class PythonTestsVerifier:
    """Reward 1.0 only when every hidden test passes in the judge; statuses from base.STATUSES.

    The tests are the gold, and a gold that passes everything grades nothing: before a problem's first
    completion is scored, its tests run once against a candidate that does nothing (`do_nothing`); if they pass
    (a `check` that asserts nothing, tests that never call the entry point), every completion of the problem is
    `invalid_gold` with reward 0. The finding is cached per set of tests, per process."""

    name = "python_tests"
    _vacuous: dict[str, str | None] = {}  # tests (JSON) -> why they cannot fail, or None
    _vacuous_lock = threading.Lock()

    def __init__(self, limits: Limits = DEFAULT_LIMITS):
        self.limits = limits

    def cannot_fail(self, spec: dict) -> str | None:
        """Why these tests pass a do-nothing candidate, or None when they can fail (cached)."""
        key = json.dumps(spec, sort_keys=True)
        with self._vacuous_lock:
            if key in self._vacuous:
                return self._vacuous[key]
        total = 1 if "check" in spec else len(spec["asserts"])
        try:
            outcome = _outcome(_run_pair(spec["setup"] + "\n" + do_nothing(spec), spec, self.limits), "", total)
        except Exception:  # noqa: BLE001 - a sandbox failure here says nothing about the tests: score as usual
            return None
        why = (
            f"the hidden tests pass a candidate that does nothing ({outcome.verdict.detail}): they cannot fail"
            if outcome.verdict.status == "correct"
            else None
        )
        with self._vacuous_lock:
            self._vacuous[key] = why
        return why

    def score(self, completion: str, problem) -> Verdict:
        return self.run(completion, problem).verdict

    def run(self, completion: str, problem) -> CodeOutcome:
        meta = getattr(problem, "meta", None) or {}
        spec = test_spec(getattr(problem, "tests", None), meta.get("entry_point"))
        if spec is None:
            return CodeOutcome(Verdict("invalid_gold", 0.0, None, "no hidden tests"), 0, 0)
        vacuous = self.cannot_fail(spec)
        if vacuous:
            return CodeOutcome(Verdict("invalid_gold", 0.0, None, vacuous), 0, 0)
        code = extract_code(completion, spec["setup"])
        if code is None:
            return CodeOutcome(Verdict("no_answer", 0.0, None, "no code found"), 0, 0)
        total = 1 if "check" in spec else len(spec["asserts"])
        try:
            judge = _run_pair(spec["setup"] + "\n" + code, spec, self.limits)
        except Exception as e:  # a sandbox failure is an error verdict, never a crash of the run
            return CodeOutcome(Verdict("error", 0.0, code, f"sandbox: {type(e).__name__}: {e}"[:300]), 0, total)
        return _outcome(judge, code, total)


def _run_pair(source: str, spec: dict, limits: Limits):
    """Run candidate and judge side by side, joined by two pipes; returns the judge's SandboxResult."""
    wire = _runtime_file("wire.py")
    c2j_r, c2j_w = os.pipe()
    j2c_r, j2c_w = os.pipe()
    stop = threading.Event()
    box = {}

    def candidate():
        try:
            run_sandboxed(
                [IN_PROCESS, "candidate.py", str(j2c_r), str(c2j_w)],
                {"candidate.py": _runtime_file("candidate.py"), "wire.py": wire, "solution.py": source},
                limits=limits,
                pass_fds=(j2c_r, c2j_w),
                close_passed=True,
                stop=stop,
            )
        except Exception as e:  # noqa: BLE001 - reported below as a sandbox failure
            box["error"] = e

    thread = threading.Thread(target=candidate, daemon=True)
    thread.start()
    try:
        judge = run_sandboxed(
            [IN_PROCESS, "judge.py", str(c2j_r), str(j2c_w)],
            {"judge.py": _runtime_file("judge.py"), "wire.py": wire},
            stdin=json.dumps(spec),
            limits=limits,
            pass_fds=(c2j_r, j2c_w),
            close_passed=True,
        )
    finally:
        stop.set()
        thread.join()
    # The candidate's own exit status and stderr are not read: it could forge a setup failure to turn
    # "wrong" into "error". Its setup is the judge's setup, so a real failure shows in the judge.
    if "error" in box:
        raise RuntimeError(f"candidate sandbox: {box['error']!r}")
    if _setup_failed(judge):
        raise RuntimeError(f"judge sandbox: {judge.stderr[:200]!r}")
    return judge


def _setup_failed(res) -> bool:
    return res.returncode == 125 and res.stderr.startswith(b"sandbox setup failed")


def _outcome(judge, code: str, total: int) -> CodeOutcome:
    lines = []
    for raw in judge.stdout.decode("utf-8", "replace").splitlines():
        try:
            lines.append(json.loads(raw))
        except ValueError:
            continue
    gold = [m["gold_error"] for m in lines if isinstance(m, dict) and "gold_error" in m]
    if gold:
        return CodeOutcome(Verdict("invalid_gold", 0.0, code, f"tests do not load: {gold[0]}"), 0, total)
    results = [m for m in lines if isinstance(m, dict) and "test" in m]
    passed = sum(1 for m in results if m.get("passed") is True)
    failed = [m.get("detail", "") for m in results if m.get("passed") is not True]
    done = any(isinstance(m, dict) and m.get("done") == total for m in lines)
    if judge.timed_out:
        return CodeOutcome(Verdict("timeout", 0.0, code, f"deadline; passed {passed}/{total} before it"), passed, total)
    if not done or judge.returncode != 0:
        tail = judge.stderr.decode("utf-8", "replace")[-300:]
        return CodeOutcome(
            Verdict("error", 0.0, code, f"judge ended early (rc {judge.returncode}): {tail}"), passed, total
        )
    if passed == total:
        return CodeOutcome(Verdict("correct", 1.0, code, f"passed {passed}/{total}"), passed, total)
    return CodeOutcome(
        Verdict("wrong", 0.0, code, f"passed {passed}/{total}; {failed[0] if failed else ''}"[:300]), passed, total
    )


def normalise_output(text: str) -> list[str]:
    """Lines with runs of whitespace collapsed and trailing blank lines dropped."""
    lines = [" ".join(line.split()) for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


class StdioVerifier:
    """Run the program on each case's stdin; correct only when every case's whole stdout matches.

    problem.tests: [{"stdin": str, "stdout": str}, ...] (or one such dict). Comparison is of whole
    normalised line lists: a missing, extra or truncated line is wrong (exact=True compares bytes as text).
    """

    name = "stdio"

    def __init__(self, limits: Limits = DEFAULT_LIMITS, exact: bool = False):
        self.limits, self.exact = limits, exact

    def score(self, completion: str, problem) -> Verdict:
        cases = getattr(problem, "tests", None)
        cases = [cases] if isinstance(cases, dict) else cases
        if not cases or not all(isinstance(c, dict) and isinstance(c.get("stdout"), str) for c in cases):
            return Verdict("invalid_gold", 0.0, None, "no stdio cases")
        if all(self._same("", c["stdout"]) for c in cases):  # a program that prints nothing passes them all
            return Verdict("invalid_gold", 0.0, None, "every case expects no output: a do-nothing program passes")
        code = extract_code(completion)
        if code is None:
            return Verdict("no_answer", 0.0, None, "no code found")
        for i, case in enumerate(cases):
            try:
                res = run_sandboxed(code, stdin=case.get("stdin", ""), limits=self.limits)
            except Exception as e:  # noqa: BLE001 - a sandbox failure is an error verdict
                return Verdict("error", 0.0, code, f"sandbox: {type(e).__name__}: {e}"[:300])
            if res.timed_out:
                return Verdict("timeout", 0.0, code, f"case {i}: deadline")
            if _setup_failed(res):
                return Verdict("error", 0.0, code, res.stderr.decode("utf-8", "replace")[:300])
            if res.output_truncated or not self._same(res.stdout.decode("utf-8", "replace"), case["stdout"]):
                return Verdict("wrong", 0.0, code, f"case {i}: output differs (rc {res.returncode})")
        return Verdict("correct", 1.0, code, f"{len(cases)} cases")

    def _same(self, got: str, want: str) -> bool:
        return got == want if self.exact else normalise_output(got) == normalise_output(want)


def score_code_batch(verifier, completions: list[str], problems: list, workers: int = 2) -> list[Verdict]:
    """Score pairs in parallel with at most `workers` sandboxes (pairs) at once; order is kept."""

    def one(pair):
        try:
            return verifier.score(*pair)
        except Exception as e:  # noqa: BLE001 - never a crash of the run
            return Verdict("error", 0.0, None, f"{type(e).__name__}: {e}"[:300])

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(one, zip(completions, problems)))
