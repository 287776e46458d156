"""Verifiers: each turns (completion, problem) into a Verdict; composition turns verdicts into rewards.

Heavy modules (math-verify, sympy) load only when their verifier is imported, so this stays cheap.
"""

from rlvr.verifiers.base import STATUSES, Verdict, Verifier

__all__ = ["STATUSES", "Verdict", "Verifier"]
