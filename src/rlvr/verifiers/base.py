"""The verdict every verifier returns, and the protocol verifiers follow."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol

# A parse failure is not a wrong answer: every verdict says which of these it is.
STATUSES = ("correct", "wrong", "no_answer", "multiple_answers", "timeout", "invalid_gold", "error")
# Verdicts that say nothing about the completion: the verifier ran out of time, failed, or had no usable gold.
# Integrations hand them to other trainers as "no reward" (TRL: None) rather than as a wrong answer.
FAULT_STATUSES = ("timeout", "error", "invalid_gold")


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
