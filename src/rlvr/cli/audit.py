"""`rlvr audit --verifier KIND`: attack a verifier with its built-in suite of known hacks; exit 1 if one passes."""

from __future__ import annotations

import argparse

from rlvr.cli.verify import CODE_KINDS, add_verifier_args


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("audit", help="attack a verifier with known hacks; check true equivalences")
    add_verifier_args(p)
    p.add_argument("--verbose", action="store_true", help="also list every false reject")
    return p


def run(args) -> int:
    if args.verifier in CODE_KINDS:
        from rlvr.verifiers.code_commands import audit_code

        args.timeout = args.timeout_s
        return audit_code(args)
    from rlvr.verifiers.commands import run_audit

    return run_audit(args)
