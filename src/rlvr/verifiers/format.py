"""The format reward: did the completion end with exactly one boxed final answer, as the prompt asked?

A shaping term, not a correctness term: it pays for the shape of the answer whatever its value, so
composition (compose.py) keeps its weight at most 10% of the correctness term's by default. Its own
maximum is 1.0; the weight is applied by composition.
"""

from __future__ import annotations

from rlvr.verifiers.base import Verdict
from rlvr.verifiers.extract import find_boxes

# Text after the box is allowed (closing "$", a period, "I hope this helps") but not a long essay:
# "final" means the box is where the completion ends up.
MAX_TRAILING_CHARS = 200


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


def boxed_format_check(completion) -> Verdict:
    """correct: exactly one non-empty `\\boxed{}` near the end; else no_answer / multiple_answers / wrong."""
    text = completion_text(completion)
    boxes = find_boxes(text)
    if not boxes:
        return Verdict("no_answer", 0.0, None, "no \\boxed{} answer")
    if len(boxes) > 1:
        return Verdict("multiple_answers", 0.0, " | ".join(b.content for b in boxes), f"{len(boxes)} boxes")
    box = boxes[0]
    if not box.content:
        return Verdict("no_answer", 0.0, "", "empty box")
    if len(text) - box.end > MAX_TRAILING_CHARS:
        return Verdict("wrong", 0.0, box.content, "the box is not the final answer (long text after it)")
    return Verdict("correct", 1.0, box.content, "one final boxed answer")


class BoxedFormatVerifier:
    """The format reward as a verifier (ignores the gold): lets composition treat every term alike."""

    name = "boxed_format"

    def score(self, completion, problem=None) -> Verdict:
        return boxed_format_check(completion)
