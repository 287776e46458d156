"""`rlvr verify` and `rlvr audit` through their argparse entry points (as the CLI calls them)."""

import argparse
import json
import time

from rlvr.cli import audit as audit_verb
from rlvr.cli import verify as verify_verb
from rlvr.verifiers.audit_cases import AuditSuite
from rlvr.verifiers.base import Verdict
from rlvr.verifiers.commands import run_audit, run_verify

LINES = [
    json.dumps({"completion": r"\boxed{4}", "gold": "4", "id": "a"}),
    "not json at all",
    json.dumps({"completion": r"\boxed{3} or \boxed{4}", "gold": "4"}),
    json.dumps({"gold": "4"}),
    json.dumps({"completion": r"\boxed{5}", "gold": r"\frac{"}),
    json.dumps({"completion": "no box", "gold": "4"}),
]


def _parse(argv):
    parser = argparse.ArgumentParser(prog="rlvr")
    sub = parser.add_subparsers(dest="verb")
    verify_verb.add_parser(sub)
    audit_verb.add_parser(sub)
    return parser.parse_args(argv)


def _verify(tmp_path, *extra):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("\n".join(LINES) + "\n")
    args = _parse(["verify", "--verifier", "math", "--input", str(src), "--output", str(dst), "--workers", "0", *extra])
    code = run_verify(args)
    return code, [json.loads(x) for x in dst.read_text().splitlines()]


def test_verify_skips_bad_lines_and_reports_them(tmp_path, capsys):
    code, rows = _verify(tmp_path)
    assert code == 0
    assert [r["status"] for r in rows] == ["correct", "multiple_answers", "invalid_gold", "no_answer"]
    assert rows[0]["id"] == "a" and rows[0]["reward"] == 1.0 and rows[0]["extracted"] == "4"
    err = capsys.readouterr().err
    assert "in.jsonl:2: not JSON" in err and "in.jsonl:4: missing key 'completion'" in err
    assert "malformed lines          2" in err and "correct                  1" in err


def test_verify_fail_mode_keeps_what_was_written(tmp_path, capsys):
    code, rows = _verify(tmp_path, "--on-bad-line", "fail")
    assert code == 2
    assert [r["status"] for r in rows] == ["correct"]  # line 1 was written before line 2 stopped the run
    assert "in.jsonl:2" in capsys.readouterr().err


def test_verify_setting_and_unknown_verifier(tmp_path, capsys):
    code, rows = _verify(tmp_path, "--set", "require_boxed=false")
    assert code == 0 and rows[-1]["status"] == "no_answer"  # "no box" has no number either way
    args = _parse(["verify", "--verifier", "nope", "--input", "x", "--output", str(tmp_path / "o")])
    assert run_verify(args) == 2
    assert "unknown verifier kind 'nope'; choose from" in capsys.readouterr().err


def test_verify_missing_input_is_exit_2(tmp_path, capsys):
    args = _parse(["verify", "--input", str(tmp_path / "missing.jsonl"), "--output", str(tmp_path / "o.jsonl")])
    assert run_verify(args) == 2


def test_audit_math_passes_in_the_number_form_and_says_what_the_math_form_pays(capsys):
    code = run_audit(
        _parse(["audit", "--verifier", "math", "--set", "answer_form=number", "--workers", "2", "--timeout-s", "1"])
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "false-accept rate: 0.0% of 65" in out and "false-reject rate: 0.0% of" in out
    # the math form pays unevaluated expressions (\\boxed{8-3} for 5): every class runs, and the audit says so
    code = run_audit(_parse(["audit", "--verifier", "math", "--workers", "2", "--timeout-s", "1"]))
    out = capsys.readouterr().out
    assert code == 1 and "false-accept rate: 16.9% of 65" in out and "false-reject rate: 0.0% of 67" in out


class SlowGrader:
    """Takes 0.6 s on any completion that says 'slow', then judges it equal to the gold or not."""

    def score(self, completion, problem) -> Verdict:
        if "slow" in completion:
            time.sleep(0.6)
        ok = completion.split()[-1] == str(getattr(problem, "answer", problem))
        return Verdict("correct" if ok else "wrong", float(ok), completion)


def test_an_equivalence_that_times_out_is_scored_again_with_room_and_a_hack_keeps_its_refusal():
    """At a 0.3 s deadline the slow equivalence times out, is scored again at 1.2 s and passes; the slow hack (an
    answer that would be accepted) stays timed out, refused, as a deadline should refuse it; the report says so."""
    from rlvr.verifiers.audit import audit, format_report

    report = audit(
        SlowGrader(),
        workers=0,
        timeout_s=0.3,
        hacks=[("slow_hack", "slow 4", "4", "would pass if it had time")],
        equivalences=[("slow_eq", "slow 5", "5", "needs time"), ("fast_eq", "6", "6", "quick")],
    )
    assert (report.false_accept, report.false_reject, report.rescored) == (0.0, 0.0, 1)
    assert "1 equivalence(s) timed out and were scored again at 4x the deadline" in format_report(report, "slow")


def test_audit_exits_1_when_a_hack_is_accepted(capsys):
    # A lenient verifier (no box required) accepts the two 'unboxed' hacks: the audit must say so.
    code = run_audit(
        _parse(["audit", "--verifier", "math", "--set", "require_boxed=false", "--workers", "0", "--timeout-s", "1"])
    )
    out = capsys.readouterr().out
    assert code == 1 and "FAIL" in out and "unboxed" in out


def test_audit_unknown_suite(capsys):
    assert run_audit(_parse(["audit", "--verifier", "exact"])) == 2
    assert capsys.readouterr().err == "rlvr audit: no audit suite for verifier 'exact'; choose from math, trl_reward\n"


class EqualsGrader:
    """A plug-in grader (--verifier test_verifiers_commands:EqualsGrader) that brings its own audit suite."""

    def score(self, completion, problem) -> Verdict:
        ok = str(completion).strip() == str(getattr(problem, "answer", problem))
        return Verdict("correct" if ok else "wrong", float(ok), str(completion))

    def audit_suite(self) -> AuditSuite:
        return AuditSuite([("prose", "the answer is 4", "4", "words around it")], [("bare", " 4", "4", "the number")])


def test_a_kind_s_entry_gives_its_audit_suite_and_a_plugin_its_own(capsys):
    """rlvr audit asks the kind's entry (Kind.audit) for the cases, not a table keyed by the kind's name: the math
    and trl_reward kinds share the final-answer suite (its equivalences in the verifier's answer form), a plug-in
    grader's `audit_suite` method is its suite, a kind without one is refused naming those that have one."""
    from rlvr.verifiers.audit_cases import EQUIVALENCES, HACKS, NUMBER_EQUIVALENCES, NUMBER_HACKS, math_suite
    from rlvr.verifiers.registry import KINDS, build_verifier

    assert [name for name in KINDS if KINDS.get(name).audit is not None] == ["math", "trl_reward"]
    assert math_suite(build_verifier("math")) == AuditSuite(HACKS + NUMBER_HACKS, EQUIVALENCES)
    number = math_suite(build_verifier("math", {"answer_form": "number"}))
    assert number == AuditSuite(HACKS + NUMBER_HACKS, NUMBER_EQUIVALENCES, "number")
    plugin = "test_verifiers_commands:EqualsGrader"
    assert run_audit(_parse(["audit", "--verifier", plugin, "--workers", "0"])) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"audit of verifier {plugin!r}\n") and "false-accept rate: 0.0% of 1" in out
    assert "false-reject rate: 0.0% of 1" in out
    assert run_audit(_parse(["audit", "--verifier", "registry_plugins:FormAwareGrader"])) == 2
    assert capsys.readouterr().err.startswith(
        "rlvr audit: no audit suite for verifier 'registry_plugins:FormAwareGrader'"
    )


def test_verify_task_grades_as_the_task_does_in_training(tmp_path):
    """`rlvr verify --task arithmetic`: the task's grader, in its number form, with its reward terms (math 1.0 +
    format 0.1): an unevaluated expression is wrong (it still earns the format term, as in training)."""
    from rlvr.cli import main

    rows = [
        (r"\boxed{8 - 3}", "5", "wrong", 0.1),
        (r"\boxed{2+3}", "5", "wrong", 0.1),
        (r"\boxed{10/2}", "5", "wrong", 0.1),
        (r"\boxed{5}", "5", "correct", 1.1),
        (r"\boxed{5.0}", "5", "correct", 1.1),
        (r"\boxed{1,292}", "1292", "correct", 1.1),
        ("no box, 5", "5", "no_answer", 0.0),
    ]
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps({"completion": c, "gold": g}) + "\n" for c, g, _, _ in rows))
    assert main(["verify", "--task", "arithmetic", "--input", str(src), "--output", str(dst), "--workers", "0"]) == 0
    got = [json.loads(x) for x in dst.read_text().splitlines()]
    assert [(g["status"], round(g["reward"], 6)) for g in got] == [(s, r) for _, _, s, r in rows]
    # the same rows through the plain math verifier keep its scores: the form is the task's, not the verifier's
    assert main(["verify", "--verifier", "math", "--input", str(src), "--output", str(dst), "--workers", "0"]) == 0
    assert [json.loads(x)["status"] for x in dst.read_text().splitlines()][:3] == ["correct"] * 3


def test_verify_task_refuses_a_verifier_beside_it_and_an_unknown_task(tmp_path, capsys):
    from rlvr.cli import main

    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"completion": "x", "gold": "1"}) + "\n")
    out = str(tmp_path / "o.jsonl")
    assert main(["verify", "--task", "arithmetic", "--verifier", "math", "--input", str(src), "--output", out]) == 2
    assert main(["verify", "--task", "nope", "--input", str(src), "--output", out]) == 2
    assert "unknown task 'nope'; choose from" in capsys.readouterr().err


def test_verify_reads_the_gold_by_the_gold_column_rule(tmp_path, capsys):
    """answer, gold, solution, ground_truth: the first present (and not null) wins; none of them is malformed."""
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    rows = [
        {"completion": r"\boxed{4}", "ground_truth": "4"},
        {"completion": r"\boxed{4}", "solution": "4"},
        {"completion": r"\boxed{4}", "answer": "4", "solution": "5"},  # answer first
        {"completion": r"\boxed{4}", "answer": None, "gold": "4"},  # a null answer is not present
        {"completion": r"\boxed{4}", "expected": "4"},
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = _parse(["verify", "--input", str(src), "--output", str(dst), "--workers", "0"])
    assert run_verify(args) == 0
    out = [json.loads(x) for x in dst.read_text().splitlines()]
    assert [r["status"] for r in out] == ["correct"] * 4
    assert (
        "in.jsonl:5: no gold answer (give one of the keys answer, gold, solution, ground_truth, final_answer)"
        in capsys.readouterr().err
    )
