"""The format reward: did the completion end with exactly one boxed final answer, as the prompt asked?
With `answer_format="tags"` (the R1 format the task's prompt then asks for): reasoning in one closed
`<think>...</think>` (optional), then exactly one non-empty `<answer>...</answer>` that ends the completion.

A shaping term, not a correctness term: it pays for the shape of the answer whatever its value, so
composition (compose.py) keeps its weight at most 10% of the correctness term's by default. Its own
maximum is 1.0; the weight is applied by composition.
"""

from __future__ import annotations

from rlvr.tasks.answer_formats import ANSWER_FORMATS, BOXED, TAGS, Shape
from rlvr.verifiers.base import Verdict


def completion_text(completion) -> str:
    """Plain text of a completion: a string, or TRL's conversational form (a list of message dicts)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    if isinstance(completion, (list, tuple)):
        parts = [m.get("content", "") if isinstance(m, dict) else str(m) for m in completion]
        return "\n".join(p for p in parts if isinstance(p, str))
    return "" if completion is None else str(completion)


def _verdict(shape: Shape) -> Verdict:
    status, extracted, why = shape
    return Verdict(status, 1.0 if status == "correct" else 0.0, extracted, why)


def boxed_format_check(completion) -> Verdict:
    """correct: exactly one non-empty `\\boxed{}` near the end; else no_answer / multiple_answers / wrong."""
    return _verdict(BOXED.check(completion_text(completion)))


def tags_format_check(completion) -> Verdict:
    """correct: `<think>...</think>` (optional, closed, before the answer), then exactly one non-empty
    `<answer>...</answer>` near the end; else no_answer / multiple_answers / wrong."""
    return _verdict(TAGS.check(completion_text(completion)))


class BoxedFormatVerifier:
    """The format reward as a verifier (ignores the gold): lets composition treat every term alike. It checks
    the task's answer format (`answer_format`: boxed or tags), whatever the kind's name says."""

    name = "boxed_format"

    def __init__(self, answer_format: str = "boxed"):
        self.format = ANSWER_FORMATS.get(answer_format)
        self.answer_format = answer_format

    def score(self, completion, problem=None) -> Verdict:
        return _verdict(self.format.check(completion_text(completion)))
