"""Finding the final answer in a completion: boxed answers (or answer tags), which of them count, and prose hedges.

Answer formats (`answer_format=` on the answer verifiers and the format reward, chosen per task):
- "boxed" (default): the answer is in `\\boxed{...}`;
- "tags": the answer is in `<answer>...</answer>`, after reasoning in `<think>...</think>` (the R1 / open-r1
  format). Only answer tags count (a box inside the reasoning is not an answer); a box inside the answer tag is
  unwrapped (`<answer>\\boxed{5}</answer>` answers 5). An answer tag that is never closed is no answer (a
  truncated completion).

Pure string functions, no sympy: they run before any parsing, so they are cheap and cannot hang.

Hedging policy (`hedging=` on the math verifier):
- "last" (default): the final answer is the last group of boxes. Boxes belong to one group when only
  connective text separates them (at most `MAX_CONNECTIVE_WORDS` words, e.g. "or", "and", ", ",
  "or maybe"): `\\boxed{3} or \\boxed{4}` is one group offering two answers (hedging). A box that
  follows an earlier one after real text ("Wait, I made an arithmetic error in step 2, so...") starts a
  new group and replaces it: self-correction is allowed, and it never pays more than answering once.
- "strict": every box in the completion belongs to the final group; any two distinct boxed answers
  anywhere are a hedge (no self-correction); so are alternatives offered in prose anywhere outside the boxes
  ("The answer is 3 or 4, final: \\boxed{3}"), however far from the box (`prose_hedge_anywhere`).
The same value boxed twice is one answer under both policies (that check needs parsing: see math.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEDGING_POLICIES = ("last", "strict")
ANSWER_FORMATS = ("boxed", "tags")
MAX_CONNECTIVE_WORDS = 3

_BOX_START = re.compile(r"\\(?:boxed|fbox)\s*")
_WORD = re.compile(r"[A-Za-z]{2,}")
# "3 or 5", "$3$, or maybe $5$": a number (or $math$) joined to another by "or".
_ALT = r"(?:-?\d[\d,./]*|\$[^$]{1,80}\$)"
_PROSE_OR = re.compile(_ALT + r"\s*,?\s*(?:or|and/or)\b\s*(?:maybe|possibly|perhaps)?\s*" + _ALT, re.I)
_OR_AFTER_BOX = re.compile(r"^[\s$.,)]*(?:or|and/or)\b\s*(?:maybe|possibly|perhaps)?\s*" + _ALT, re.I)
_OR_BEFORE_BOX = re.compile(_ALT + r"\s*,?\s*(?:or|and/or)\b\s*(?:maybe|possibly|perhaps)?\s*\$*\s*$", re.I)


@dataclass(frozen=True)
class Box:
    """One boxed answer: its content and where the whole `\\boxed{...}` sits in the text."""

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


_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.S)


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


def find_answers(text: str, answer_format: str = "boxed") -> list[Box]:
    """The candidate final answers of a completion in the given answer format (see the module doc)."""
    if answer_format == "tags":
        return find_answer_tags(text)
    if answer_format != "boxed":
        raise ValueError(f"answer_format={answer_format!r}; choose from {', '.join(ANSWER_FORMATS)}")
    return find_boxes(text)


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


def is_connective(gap: str) -> bool:
    """True when the text between two boxes only joins them ("or", ", ", "and maybe", "$ $")."""
    return len(_WORD.findall(re.sub(r"\\[A-Za-z]+", " ", gap))) <= MAX_CONNECTIVE_WORDS


def final_group(text: str, boxes: list[Box], hedging: str) -> list[Box]:
    """The boxes that together make the final answer under the hedging policy (see module doc)."""
    if hedging not in HEDGING_POLICIES:
        raise ValueError(f"hedging={hedging!r}; choose from {', '.join(HEDGING_POLICIES)}")
    if hedging == "strict" or len(boxes) <= 1:
        return list(boxes)
    group = [boxes[-1]]
    for prev in reversed(boxes[:-1]):
        if not is_connective(text[prev.end : group[0].start]):
            break
        group.insert(0, prev)
    return group


def prose_hedge_around(text: str, group: list[Box]) -> bool:
    """True when the final boxed answer is offered alongside another in prose: "3 or \\boxed{5}"."""
    before = text[: group[0].start]
    before = before[max(before.rfind("\n"), before.rfind(". ")) + 1 :]
    after = text[group[-1].end :]
    after = after[: min((k for k in (after.find("\n"), after.find(". ")) if k >= 0), default=len(after))]
    return bool(_OR_BEFORE_BOX.search(before) or _OR_AFTER_BOX.search(after))


def prose_hedge_anywhere(text: str, boxes: list[Box]) -> bool:
    """True when the text outside the boxes offers alternatives anywhere ("3 or 4"): the "strict" policy's rule,
    under which two candidate answers anywhere are a hedge, even when the box then picks one."""
    outside, at = [], 0
    for box in boxes:
        outside.append(text[at : box.start])
        at = box.end
    outside.append(text[at:])
    return any(_PROSE_OR.search(part) for part in outside)


def prose_hedge_final(text: str) -> bool:
    """True when the last non-empty line offers alternatives ("it is 3 or 5"): unboxed mode only."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return bool(lines) and bool(_PROSE_OR.search(lines[-1]))


# A plain number as a final answer: an optional sign (not a minus between two operands, "10-3"), digits with
# thousands commas, a decimal part or a fraction bar.
_LAST_NUMBER = re.compile(r"(?<![\w)\]}.])-?\d+(?:,\d{3})*(?:\.\d+)?(?:/\d+)?")
_DOLLAR_MATH = re.compile(r"\$([^$]{1,200})\$")


def last_answer(text: str) -> str | None:
    """The completion's final number or expression whatever its format: whichever ends last of a boxed answer, an
    answer tag, a `$...$` span and a plain number. One candidate only (the last), so a hedge ("3 or 5") offers
    one answer, not two. Thousands commas are dropped ("1,234" -> "1234"). None when the text has none.

    What lenient scoring grades (rlvr.evaluation.lenient): the answer the model gave, whether or not it wrote it
    the way the task asks."""
    found: list[tuple[int, str]] = [(b.end, b.content) for b in find_boxes(text)]
    found += [(b.end, b.content) for b in find_answer_tags(text)]
    found += [(m.end(), m.group(1).strip()) for m in _DOLLAR_MATH.finditer(text)]
    found += [(m.end(), m.group(0).replace(",", "")) for m in _LAST_NUMBER.finditer(text)]
    found = [(end, content) for end, content in found if content]
    return max(found, key=lambda f: f[0])[1] if found else None
