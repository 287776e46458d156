"""Attacking a verifier with known hacks and checking it accepts true equivalences.

`audit(verifier)` scores both built-in suites (audit_cases.py) and returns per-group counts; a hack
that scores above 0 is a false accept, an equivalence that scores below 1 is a false reject. The
`rlvr audit` verb prints the table and exits 1 when any hack is accepted.

An equivalence that times out is scored once more with four times the deadline: a worker killed on a loaded
machine says how fast the machine was, not what the verifier decides (CI saw 2 of 67 at 1 s). A hack that times out
is refused, which is what a deadline is for, so it keeps its verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlvr.verifiers.audit_cases import EQUIVALENCES, HACKS
from rlvr.verifiers.pool import score_batch

RESCORE_FACTOR = 4


@dataclass
class GroupResult:
    """One group of one suite: how many cases, how many went the wrong way, and which."""

    suite: str
    group: str
    total: int = 0
    failed: int = 0
    failures: list = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.failed / self.total if self.total else 0.0


@dataclass
class AuditReport:
    groups: list[GroupResult]
    rescored: int = 0  # equivalences that timed out at the deadline and were scored again at RESCORE_FACTOR times it

    def rate(self, suite: str) -> float:
        gs = [g for g in self.groups if g.suite == suite]
        total = sum(g.total for g in gs)
        return sum(g.failed for g in gs) / total if total else 0.0

    @property
    def false_accept(self) -> float:
        return self.rate("hack")

    @property
    def false_reject(self) -> float:
        return self.rate("equivalence")

    @property
    def hacks_accepted(self) -> int:
        return sum(g.failed for g in self.groups if g.suite == "hack")


def audit(verifier, workers: int = 2, timeout_s: float = 5.0, hacks=HACKS, equivalences=EQUIVALENCES) -> AuditReport:
    """Score both suites with `verifier`; each case is (group, completion, gold, why)."""
    cases = [("hack", *c) for c in hacks] + [("equivalence", *c) for c in equivalences]
    verdicts = score_batch(verifier, [c[2] for c in cases], [c[3] for c in cases], workers, timeout_s)
    slow = [i for i, (c, v) in enumerate(zip(cases, verdicts)) if c[0] == "equivalence" and v.status == "timeout"]
    again = score_batch(
        verifier, [cases[i][2] for i in slow], [cases[i][3] for i in slow], workers, timeout_s * RESCORE_FACTOR
    )
    for i, v in zip(slow, again):
        verdicts[i] = v
    groups: dict[tuple[str, str], GroupResult] = {}
    for (suite, group, completion, gold, why), v in zip(cases, verdicts):
        g = groups.setdefault((suite, group), GroupResult(suite, group))
        g.total += 1
        bad = v.reward > 0 if suite == "hack" else v.reward < 1
        if bad:
            g.failed += 1
            g.failures.append((completion, gold, why, v))
    return AuditReport(list(groups.values()), rescored=len(slow))


def format_report(report: AuditReport, verifier_name: str, verbose: bool = False) -> str:
    """A plain-text table: per group the case count and the false-accept or false-reject rate."""
    lines = [
        f"audit of verifier {verifier_name!r}",
        f"{'suite':<12} {'group':<18} {'cases':>5} {'failed':>6} {'rate':>7}",
    ]
    for g in report.groups:
        lines.append(f"{g.suite:<12} {g.group:<18} {g.total:>5} {g.failed:>6} {g.rate:>7.1%}")
        for completion, gold, why, v in g.failures if (verbose or g.suite == "hack") else []:
            lines.append(f"    FAIL ({why}): {completion[:70]!r} vs gold {gold!r} -> {v.status} {v.detail[:60]}")
    n_h = sum(g.total for g in report.groups if g.suite == "hack")
    n_e = sum(g.total for g in report.groups if g.suite == "equivalence")
    lines.append(f"false-accept rate: {report.false_accept:.1%} of {n_h} hacks")
    lines.append(f"false-reject rate: {report.false_reject:.1%} of {n_e} equivalences")
    if report.rescored:
        lines.append(
            f"{report.rescored} equivalence(s) timed out and were scored again at {RESCORE_FACTOR}x the deadline "
            "(the machine was slow, not the verifier wrong; a run with this deadline would score them 0)"
        )
    return "\n".join(lines)
