"""Small verifiers for answers that are not math expressions: exact text, a number, a letter, a regex.

All share one extraction rule (`final_answer`): the final boxed group when there is a box (hedged
distinct boxes are `multiple_answers`, as for math), else, with `require_boxed=False`, the text after a
last "answer:" / "answer is", or the last non-empty line. Gold is `problem.answer` (or a string).
`answer_format="tags"` reads `<answer>...</answer>` where "boxed" reads `\\boxed{}` (extract.find_answers).
"""

from __future__ import annotations

import re
import unicodedata

from rlvr.tasks.answer_formats import ANSWER_FORMATS
from rlvr.verifiers.base import Verdict
from rlvr.verifiers.extract import final_group
from rlvr.verifiers.format import completion_text

_ANSWER_IS = re.compile(r"answer\s*(?:is|:)\s*(.+)", re.I)
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+")


def gold_of(problem) -> str | None:
    return problem if isinstance(problem, str) or problem is None else getattr(problem, "answer", None)


def check_format(answer_format: str) -> str:
    ANSWER_FORMATS.check(answer_format)
    return answer_format


def final_answer(completion, require_boxed: bool, answer_format: str = "boxed") -> str | Verdict:
    """The answer text, or the verdict explaining why there is none."""
    text = completion_text(completion)
    fmt = ANSWER_FORMATS.get(answer_format)
    boxes = fmt.find(text)
    if boxes:
        group = final_group(text, boxes, "last")
        contents = list(dict.fromkeys(normalize_text(b.content) for b in group))
        if len(contents) > 1:
            shown = " | ".join(b.content for b in group)
            return Verdict("multiple_answers", 0.0, shown, "distinct boxed answers offered together")
        return group[-1].content
    if require_boxed:
        return Verdict("no_answer", 0.0, None, f"no {fmt.missing} (require_boxed=True)")
    said = _ANSWER_IS.findall(text)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    found = said[-1].strip() if said else (lines[-1] if lines else "")
    if not found:
        return Verdict("no_answer", 0.0, None, "empty completion")
    return found.rstrip(".")


def normalize_text(s: str) -> str:
    """Case-folded, NFKC, whitespace collapsed, `\\text{}` and `$` removed, trailing period dropped."""
    s = unicodedata.normalize("NFKC", s)
    s = re.sub(r"\\text\{([^{}]*)\}", r"\1", s).replace("$", "")
    return " ".join(s.casefold().split()).rstrip(".")


def _judged(ok: bool, got: str) -> Verdict:
    return Verdict("correct" if ok else "wrong", float(ok), got, "matches gold" if ok else "differs from gold")


class ExactMatchVerifier:
    """Normalised text equality with the gold (see normalize_text)."""

    name = "exact"

    def __init__(self, require_boxed: bool = True, case_sensitive: bool = False, answer_format: str = "boxed"):
        self.require_boxed, self.case_sensitive = require_boxed, case_sensitive
        self.answer_format = check_format(answer_format)

    def score(self, completion, problem) -> Verdict:
        gold = gold_of(problem)
        if gold is None or not str(gold).strip():
            return Verdict("invalid_gold", 0.0, None, "empty gold")
        got = final_answer(completion, self.require_boxed, self.answer_format)
        if isinstance(got, Verdict):
            return got
        norm = (lambda s: " ".join(s.split())) if self.case_sensitive else normalize_text
        return _judged(norm(got) == norm(str(gold)), got)


class NumericVerifier:
    """One number, compared with |a - b| <= max(rel_tol * max(|a|, |b|), abs_tol). Integers exactly."""

    name = "numeric"

    def __init__(
        self, require_boxed: bool = True, rel_tol: float = 1e-9, abs_tol: float = 0.0, answer_format: str = "boxed"
    ):
        self.require_boxed, self.rel_tol, self.abs_tol = require_boxed, rel_tol, abs_tol
        self.answer_format = check_format(answer_format)

    def score(self, completion, problem) -> Verdict:
        gold = parse_number(str(gold_of(problem) or ""))
        if gold is None:
            return Verdict("invalid_gold", 0.0, None, f"gold {gold_of(problem)!r} is not one number")
        got = final_answer(completion, self.require_boxed, self.answer_format)
        if isinstance(got, Verdict):
            return got
        numbers = _NUMBER.findall(got)
        if not numbers:
            return Verdict("no_answer", 0.0, got, "no number in the answer")
        if len(set(numbers)) > 1:
            return Verdict("multiple_answers", 0.0, got, "several numbers in the answer")
        value = _numeral(numbers[0])
        if isinstance(value, int) and isinstance(gold, int):
            return _judged(value == gold, got)
        ok = abs(value - gold) <= max(self.rel_tol * max(abs(value), abs(gold)), self.abs_tol)
        return _judged(ok, got)


def parse_number(s: str) -> int | float | None:
    """'1,234' -> 1234, '-0.5' -> -0.5, '1e3' -> 1000.0; None unless the string is one number."""
    s = s.strip().replace("$", "").rstrip(".")
    if not _NUMBER.fullmatch(s):
        return None
    return _numeral(s)


def _numeral(s: str) -> int | float:
    """A string the number pattern matches whole, as a number: an integer exactly."""
    s = s.replace(",", "")
    try:
        return int(s)
    except ValueError:
        return float(s)


class MultipleChoiceVerifier:
    """A single option letter: `\\boxed{B}`, `(B)`, `B)`, `Answer: B`. Two different letters are a hedge."""

    name = "multiple_choice"

    def __init__(self, choices: str = "ABCDE", require_boxed: bool = False, answer_format: str = "boxed"):
        self.choices, self.require_boxed = choices.upper(), require_boxed
        self.answer_format = check_format(answer_format)

    def score(self, completion, problem) -> Verdict:
        gold = str(gold_of(problem) or "").strip().strip("()").upper()
        if len(gold) != 1 or gold not in self.choices:
            return Verdict("invalid_gold", 0.0, None, f"gold {gold_of(problem)!r} is not one of {self.choices}")
        got = final_answer(completion, self.require_boxed, self.answer_format)
        if isinstance(got, Verdict):
            return got
        letters = set(re.findall(rf"(?<![A-Za-z])([{self.choices}{self.choices.lower()}])(?![A-Za-z])", got))
        letters = {c.upper() for c in letters}
        if not letters:
            return Verdict("no_answer", 0.0, got, f"no option letter from {self.choices}")
        if len(letters) > 1:
            return Verdict("multiple_answers", 0.0, got, f"several options: {''.join(sorted(letters))}")
        return _judged(letters == {gold}, got)


class RegexVerifier:
    """The answer is what `pattern` captures (group 1, else the match) at its last match in the text;
    it must equal the gold after normalize_text, or fully match the gold as a regex (gold_is_pattern)."""

    name = "regex"

    def __init__(self, pattern: str = r"answer\s*:\s*(.+)", gold_is_pattern: bool = False, ignore_case: bool = True):
        self.pattern = re.compile(pattern, re.I if ignore_case else 0)
        self.gold_is_pattern, self.ignore_case = gold_is_pattern, ignore_case

    def score(self, completion, problem) -> Verdict:
        gold = gold_of(problem)
        if gold is None or not str(gold).strip():
            return Verdict("invalid_gold", 0.0, None, "empty gold")
        matches = list(self.pattern.finditer(completion_text(completion)))
        if not matches:
            return Verdict("no_answer", 0.0, None, "pattern did not match")
        m = matches[-1]
        got = (m.group(1) if m.groups() else m.group(0)).strip()
        if self.gold_is_pattern:
            try:
                ok = re.fullmatch(str(gold), got, re.I if self.ignore_case else 0) is not None
            except re.error as e:
                return Verdict("invalid_gold", 0.0, got, f"gold is not a valid regex: {e}")
            return _judged(ok, got)
        return _judged(normalize_text(got) == normalize_text(str(gold)), got)
