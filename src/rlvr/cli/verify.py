"""`rlvr verify --verifier KIND | --task NAME --input IN.jsonl --output OUT.jsonl`: score a file of completions.

Answer verifiers (math, exact, ...) read `completion` + gold lines, the gold in the first of `answer`, `gold`,
`solution`, `ground_truth` present (rlvr.verifiers.commands); code verifiers (python_tests, stdio) read
`completion` + `tests` lines and score in their sandbox (rlvr.verifiers.code_commands).
"""

from __future__ import annotations

import argparse


def add_verifier_args(p: argparse.ArgumentParser) -> None:
    """The options `verify` and `audit` share."""
    from rlvr.verifiers.registry import KINDS

    p.add_argument("--verifier", help=f"verifier kind (registered: {', '.join(sorted(KINDS))}; default math)")
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a verifier setting, e.g. hedging=strict"
    )
    p.add_argument("--workers", type=int, default=2, help="worker processes (0 = in this process)")
    p.add_argument("--timeout-s", type=float, default=5.0, help="per-item deadline in seconds")


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("verify", help="score a JSONL file of completions against golds")
    add_verifier_args(p)
    p.add_argument(
        "--task",
        help="grade exactly as this task grades in training: its grader, answer form and "
        "reward terms (rows: completion, gold; code tasks: tests, entry_point)",
    )
    p.add_argument(
        "--input",
        required=True,
        help="JSONL with `completion` and a gold answer per line (the first of "
        "answer, gold, solution, ground_truth present)",
    )
    p.add_argument("--output", required=True, help="JSONL written with status, reward, extracted added")
    p.add_argument("--on-bad-line", choices=("skip", "fail"), default="skip", help="what a malformed line does")
    return p


def run(args) -> int:
    from rlvr.verifiers.registry import runs_tests

    if runs_tests(args.verifier):  # code verifiers (their entry grades tests) score through their sandbox runner
        from rlvr.verifiers.code_commands import verify_code

        args.timeout = args.timeout_s
        return verify_code(args)
    from rlvr.verifiers.commands import run_verify

    return run_verify(args)
