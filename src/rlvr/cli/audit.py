"""`rlvr audit --verifier KIND`: attack a verifier with its built-in suite of known hacks; exit 1 if one passes."""

from __future__ import annotations

import argparse

from rlvr.cli.verify import add_verifier_args


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("audit", help="attack a verifier with known hacks; check true equivalences")
    add_verifier_args(p)
    p.add_argument(
        "--task",
        help="audit the task's own grading (its grader and answer form; reasoning_gym: every "
        "graded family beside reasoning-gym's score_answer)",
    )
    p.add_argument("--verbose", action="store_true", help="also list every false reject")
    return p


def run(args) -> int:
    from rlvr.verifiers.registry import runs_tests

    if args.task:
        return _audit_task(args)
    if runs_tests(args.verifier):  # a code verifier: the sandbox's hostile suite
        from rlvr.verifiers.code_commands import audit_code

        args.timeout = args.timeout_s
        return audit_code(args)
    from rlvr.verifiers.commands import run_audit

    return run_audit(args)


def _audit_task(args) -> int:
    """A task with its own audit (a module rlvr.verifiers.<name>_audit with audit_task()) runs it; any other is audited
    through its correctness term's verifier."""
    import importlib.util

    from rlvr.verifiers.commands import task_from_args

    task = task_from_args(args, "audits")
    own = f"rlvr.verifiers.{args.task}_audit"
    if importlib.util.find_spec(own) is not None:
        report, code = importlib.import_module(own).audit_task()
        print(report)
        return code
    term = dict(task.grader[0])
    args.verifier = term.pop("kind")
    args.set = [f"{k}={v}" for k, v in term.items() if k not in ("name", "weight")]
    args.task = None
    return run(args)
