"""The verdict every verifier returns, and the protocol verifiers follow."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol

# A parse failure is not a wrong answer: every verdict says which of these it is.
STATUSES = ("correct", "wrong", "no_answer", "multiple_answers", "timeout", "invalid_gold", "error")
# Faults: verdicts that say nothing about the completion, because the grader failed ("error") or the task's gold is
# unusable ("invalid_gold"). The one rule for them, everywhere (rlvr's loop, episodes, the TRL / verl / OpenRLHF
# adapters, the service): a fault row is left out of the loss, earns nothing (shaping terms included), and is
# handed to other trainers as "no reward" (TRL: None). Counted apart in verdict/<status>_frac.
# "timeout" is not a fault: it is a verdict on the completion. The work that ran past its limit is the
# completion's own (its program looped, its answer is an expression too large to evaluate, refused by
# rlvr.verifiers.guard or interrupted by the grading deadline), so it is graded as a wrong answer (reward 0) and
# trained on; left out, a policy would feel no pressure against answers that hang the grader. A gold that hangs the
# grader times out every completion of its group: a zero-variance group, which gives no gradient anyway.
# An environment that breaks or hangs in an episode is the environment's fault: that episode's verdict is "error".
FAULT_STATUSES = ("invalid_gold", "error")


@dataclass(frozen=True)
class Verdict:
    """The outcome of checking one completion.

    status: one of STATUSES; reward: the score this verifier gives (0.0 unless correct, for exact
    verifiers); extracted: the answer found in the completion, as text (None when nothing was found);
    detail: a short human-readable reason.
    """

    status: str
    reward: float
    extracted: str | None = None
    detail: str = ""

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"unknown verdict status {self.status!r}; choose from {', '.join(STATUSES)}")

    def to_dict(self) -> dict:
        return asdict(self)


class Verifier(Protocol):
    """Scores one completion against one problem's gold; deterministic, never raises for bad output."""

    name: str

    def score(self, completion: str, problem) -> Verdict: ...
