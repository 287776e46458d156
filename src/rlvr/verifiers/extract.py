"""Finding the final answer in a completion: boxed answers (or answer tags), which of them count, and prose hedges.

Answer formats (`answer_format=` on the answer verifiers and the format reward, chosen per task) are entries of
rlvr.tasks.answer_formats.ANSWER_FORMATS, each with its own extraction: `\\boxed{...}` ("boxed", the default) or
`<answer>...</answer>` after `<think>` reasoning ("tags", the R1 format). `find_answers` asks the task's entry.

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

from rlvr.tasks.answer_formats import ANSWER_FORMATS, Box, find_answer_tags, find_boxes

HEDGING_POLICIES = ("last", "strict")
MAX_CONNECTIVE_WORDS = 3

_WORD = re.compile(r"[A-Za-z]{2,}")
# "3 or 5", "$3$, or maybe $5$": a number (or $math$) joined to another by "or".
_ALT = r"(?:-?\d[\d,./]*|\$[^$]{1,80}\$)"
_PROSE_OR = re.compile(_ALT + r"\s*,?\s*(?:or|and/or)\b\s*(?:maybe|possibly|perhaps)?\s*" + _ALT, re.I)
_OR_AFTER_BOX = re.compile(r"^[\s$.,)]*(?:or|and/or)\b\s*(?:maybe|possibly|perhaps)?\s*" + _ALT, re.I)
_OR_BEFORE_BOX = re.compile(_ALT + r"\s*,?\s*(?:or|and/or)\b\s*(?:maybe|possibly|perhaps)?\s*\$*\s*$", re.I)


def find_answers(text: str, answer_format: str = "boxed") -> list[Box]:
    """The candidate final answers of a completion in the given answer format (rlvr.tasks.answer_formats)."""
    return ANSWER_FORMATS.get(answer_format).find(text)


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
