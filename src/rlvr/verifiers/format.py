"""The format reward: did the completion end with exactly one boxed final answer, as the prompt asked?
With `answer_format="tags"` (the R1 format the task's prompt then asks for): reasoning in one closed
`<think>...</think>` (optional), then exactly one non-empty `<answer>...</answer>` that ends the completion.

A shaping term, not a correctness term: it pays for the shape of the answer whatever its value, so
composition (compose.py) keeps its weight at most 10% of the correctness term's by default. Its own
maximum is 1.0; the weight is applied by composition.
"""

from __future__ import annotations

import re

from rlvr.verifiers.base import Verdict
from rlvr.verifiers.extract import ANSWER_FORMATS, find_answer_tags, find_boxes

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


def tags_format_check(completion) -> Verdict:
    """correct: `<think>...</think>` (optional, closed, before the answer), then exactly one non-empty
    `<answer>...</answer>` near the end; else no_answer / multiple_answers / wrong."""
    text = completion_text(completion)
    tags = [m for m in re.finditer(r"<answer>(.*?)</answer>", text, re.S)]
    if not tags:
        return Verdict("no_answer", 0.0, None, "no <answer></answer> tag")
    if len(tags) > 1:
        return Verdict(
            "multiple_answers", 0.0, " | ".join(m.group(1).strip() for m in tags), f"{len(tags)} answer tags"
        )
    tag, answer = tags[0], find_answer_tags(text)[-1].content
    if not tag.group(1).strip():
        return Verdict("no_answer", 0.0, "", "empty answer tag")
    head, tail = text[: tag.start()], text[tag.end() :]
    if head.count("<think>") > 1 or head.count("<think>") != head.count("</think>") or "<think>" in tail:
        return Verdict("wrong", 0.0, answer, "the reasoning is not one closed <think></think> before the answer")
    if len(tail) > MAX_TRAILING_CHARS:
        return Verdict("wrong", 0.0, answer, "the answer tag is not the final answer (long text after it)")
    return Verdict("correct", 1.0, answer, "reasoning, then one final answer tag")


class BoxedFormatVerifier:
    """The format reward as a verifier (ignores the gold): lets composition treat every term alike. It checks
    the task's answer format (`answer_format`: boxed or tags), whatever the kind's name says."""

    name = "boxed_format"

    def __init__(self, answer_format: str = "boxed"):
        if answer_format not in ANSWER_FORMATS:
            raise ValueError(f"answer_format={answer_format!r}; choose from {', '.join(ANSWER_FORMATS)}")
        self.answer_format = answer_format

    def score(self, completion, problem=None) -> Verdict:
        return tags_format_check(completion) if self.answer_format == "tags" else boxed_format_check(completion)
