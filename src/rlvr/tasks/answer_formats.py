"""Answer formats: how a task's prompt asks for the final answer, and how every grader finds it there.

A task names one (`task.settings.answer_format`); the answer verifiers and the format reward read the same, so the
reward grades what the prompt asked for. Each entry carries everything its callers need, so no caller tests a
format's name: the instruction and demonstration a task shows, how a bare answer is written (lenient scoring), the
extraction (`find`), the format reward's rule (`check`) and the words its verdicts use. A format of the user's is
`answer_format: package.module:attr`, an `AnswerFormat`.

- "boxed" (default): the answer is in `\\boxed{...}`;
- "tags": the answer is in `<answer>...</answer>`, after reasoning in `<think>...</think>` (the R1 / open-r1
  format). Only answer tags count (a box inside the reasoning is not an answer); a box inside the answer tag is
  unwrapped (`<answer>\\boxed{5}</answer>` answers 5). An answer tag that is never closed is no answer (a
  truncated completion).

Pure string functions, no sympy: they run before any parsing, so they are cheap and cannot hang. They sit here,
before the verifiers, because the task that asks for a format and the grader that reads it must agree.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from rlvr.registry import Registry

# Text after the final answer is allowed (closing "$", a period, "I hope this helps") but not a long essay:
# "final" means the answer is where the completion ends up.
MAX_TRAILING_CHARS = 200

_BOX_START = re.compile(r"\\(?:boxed|fbox)\s*")
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.S)


@dataclass(frozen=True)
class Box:
    """One final-answer candidate: its content and where the whole `\\boxed{...}` (or answer tag) sits."""

    content: str
    start: int
    end: int


def find_boxes(text: str) -> list[Box]:
    """All `\\boxed{...}` / `\\fbox{...}` in order, braces balanced; `\\boxed 5` takes one token.

    An unclosed brace ends the search (a truncated completion has no final answer there).
    """
    boxes, pos = [], 0
    while (m := _BOX_START.search(text, pos)) is not None:
        i = m.end()
        if i < len(text) and text[i] == "{":
            close = _matching_brace(text, i)
            if close < 0:
                break
            boxes.append(Box(text[i + 1 : close].strip(), m.start(), close + 1))
            pos = close + 1
        else:
            token = re.match(r"[^\s$\\]+", text[i:])
            if token and m.group(0).endswith((" ", "\t")):
                boxes.append(Box(token.group(0), m.start(), i + token.end()))
            pos = i + (token.end() if token else 0) + (0 if token else 1)
    return boxes


def _matching_brace(text: str, open_at: int) -> int:
    """Index of the `}` closing the `{` at open_at, skipping escaped braces; -1 when unclosed."""
    depth, i = 0, open_at
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        depth += c == "{"
        depth -= c == "}"
        if depth == 0:
            return i
        i += 1
    return -1


def find_answer_tags(text: str) -> list[Box]:
    """Every closed `<answer>...</answer>` in order, as Boxes: its content (`$` delimiters dropped) spanning the
    whole tag; boxes inside a tag are the answers instead, each at its own place (so "\\boxed{3} or \\boxed{4}"
    inside one tag is a hedge, as it is outside)."""
    out = []
    for m in _ANSWER_TAG.finditer(text):
        inner = find_boxes(m.group(1))
        if inner:
            out += [Box(b.content, m.start(1) + b.start, m.start(1) + b.end) for b in inner]
            continue
        content = m.group(1).strip()
        if len(content) >= 2 and content[0] == "$" and content[-1] == "$":
            content = content.strip("$").strip()
        out.append(Box(content, m.start(), m.end()))
    return out


# The format reward's rules, as (status, extracted, why); rlvr.verifiers.format turns them into Verdicts.
Shape = tuple[str, str | None, str]


def boxed_shape(text: str) -> Shape:
    """correct: exactly one non-empty `\\boxed{}` near the end; else no_answer / multiple_answers / wrong."""
    boxes = find_boxes(text)
    if not boxes:
        return "no_answer", None, "no \\boxed{} answer"
    if len(boxes) > 1:
        return "multiple_answers", " | ".join(b.content for b in boxes), f"{len(boxes)} boxes"
    box = boxes[0]
    if not box.content:
        return "no_answer", "", "empty box"
    if len(text) - box.end > MAX_TRAILING_CHARS:
        return "wrong", box.content, "the box is not the final answer (long text after it)"
    return "correct", box.content, "one final boxed answer"


def tags_shape(text: str) -> Shape:
    """correct: `<think>...</think>` (optional, closed, before the answer), then exactly one non-empty
    `<answer>...</answer>` near the end; else no_answer / multiple_answers / wrong."""
    tags = list(_ANSWER_TAG.finditer(text))
    if not tags:
        return "no_answer", None, "no <answer></answer> tag"
    if len(tags) > 1:
        return "multiple_answers", " | ".join(m.group(1).strip() for m in tags), f"{len(tags)} answer tags"
    tag, answer = tags[0], find_answer_tags(text)[-1].content
    if not tag.group(1).strip():
        return "no_answer", "", "empty answer tag"
    head, tail = text[: tag.start()], text[tag.end() :]
    if head.count("<think>") > 1 or head.count("<think>") != head.count("</think>") or "<think>" in tail:
        return "wrong", answer, "the reasoning is not one closed <think></think> before the answer"
    if len(tail) > MAX_TRAILING_CHARS:
        return "wrong", answer, "the answer tag is not the final answer (long text after it)"
    return "correct", answer, "reasoning, then one final answer tag"


@dataclass(frozen=True)
class AnswerFormat:
    """One answer format: what a task shows and what a grader reads. Templates take `str.format` fields.

    system_prompt: a task's system prompt in this format when it is given none (None: the task's own default);
    written: a bare answer in this format (`{}`: the answer; lenient scoring writes the last answer so);
    shown: a demonstration's assistant turn for a gold answer (task setting demo: auto);
    worked: a worked one-shot answer, `{reasoning}` then `{answer}`;
    mark: what a demonstration's last turn must contain;
    shape: the format in words, for messages; missing: what a completion without an answer lacks;
    container: the answer's container in a verdict's reason;
    find: the final-answer candidates of a completion; check: the format reward's rule;
    free_text: the answer may be prose, so its content parses as text where it is not LaTeX and "3 or 5" inside
    it is a hedge (a box holds math only).
    """

    name: str
    system_prompt: str | None
    written: str
    shown: str
    worked: str
    mark: str
    shape: str
    missing: str
    container: str
    find: Callable[[str], list[Box]]
    check: Callable[[str], Shape]
    free_text: bool = False

    def write(self, answer) -> str:
        """A bare answer written in this format: `\\boxed{7}`, `<answer>7</answer>`."""
        return self.written.format(answer)


TAGS_SYSTEM = (
    "Think through the problem inside <think></think>, then give only the final answer inside <answer></answer>."
)

ANSWER_FORMATS: Registry[AnswerFormat] = Registry("answer format", key="answer_format")
BOXED = ANSWER_FORMATS.add(
    "boxed",
    AnswerFormat(
        name="boxed",
        system_prompt=None,
        written="\\boxed{{{}}}",
        shown="The answer is \\boxed{{{}}}.",
        worked="{reasoning}\n\\boxed{{{answer}}}",
        mark="\\boxed{",
        shape="a final \\boxed{...}",
        missing="\\boxed{} answer",
        container="boxed answer",
        find=find_boxes,
        check=boxed_shape,
    ),
    "the final answer in \\boxed{...} (the default)",
)
TAGS = ANSWER_FORMATS.add(
    "tags",
    AnswerFormat(
        name="tags",
        system_prompt=TAGS_SYSTEM,
        written="<answer>{}</answer>",
        shown="<answer>{}</answer>",
        worked="<think>{reasoning}</think>\n<answer>{answer}</answer>",
        mark="</answer>",
        shape="a final <answer>...</answer>",
        missing="<answer></answer> tag",
        container="the answer tag",
        find=find_answer_tags,
        check=tags_shape,
        free_text=True,
    ),
    "reasoning in <think></think>, then the answer in <answer></answer> (the R1 format)",
)


def answer_format(name: str, key: str | None = None) -> AnswerFormat:
    """The entry called `name` (or the user's `package.module:attr`); a ConfigError naming `key` and the choices."""
    return ANSWER_FORMATS.get(name, key)


__all__ = [
    "ANSWER_FORMATS",
    "BOXED",
    "MAX_TRAILING_CHARS",
    "TAGS",
    "TAGS_SYSTEM",
    "AnswerFormat",
    "Box",
    "answer_format",
    "boxed_shape",
    "find_answer_tags",
    "find_boxes",
    "tags_shape",
]
