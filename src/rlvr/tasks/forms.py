"""Answer forms: what an answer must look like before it is compared with the gold.

Equivalence alone has a hole: for gold 5, `\\boxed{8 - 3}` *equals* 5, so a policy that copies the problem's
operands into the box is paid without computing anything. The form is part of the task's specification: an
arithmetic task asks for a number, so an unevaluated expression is a wrong answer, not a right one.

A form is a function (answer text as written in the box, gold text) -> None when the answer has the form, else
a short reason. Forms only refuse; whether an answer that has the form is right stays math-verify's call.

    math    anything math-verify can compare (symbolic expressions, sets, intervals, ...): MATH-style answers
    number  a numeral: sign, digits with thousands separators, decimals, a fraction in lowest terms (or a
            decimal) where the gold is a fraction; units and currency around it are allowed, as before
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from rlvr.registry import Registry

# Around a numeral: currency signs, percent, LaTeX spacing and text units ("5 \text{ apples}", "12 cm").
_CURRENCY = r"(?:\\\$|\$|€|£|¥|\\euro|\\pounds)"
_UNIT_TEXT = r"(?:\\(?:text|mathrm|textbf|mbox)\{[^{}]*\}|[A-Za-z][A-Za-z.]*(?:\s+[A-Za-z][A-Za-z.]*)*)"
_SPACING = re.compile(r"\\[,;:! ]|\\quad|\\qquad|~")
_SIGN = r"[+\-−]?\s*"
# 1292 | 1,292 | 1{,}292 | 1 292 (thin or plain space between groups of three) | 12.5 | .5
_DIGITS = r"(?:\d{1,3}(?:(?:,|\{,\}|\s)\d{3})+|\d+)(?:\.\d+)?|\.\d+"
_NUMERAL = re.compile(rf"{_SIGN}(?:{_DIGITS})")
_FRACTION = re.compile(rf"({_SIGN})(?:\\[dt]?frac\{{(\d+)\}}\{{(\d+)\}}|(\d+)\s*/\s*(\d+))")


def _strip_decorations(text: str) -> str:
    """The numeral's text without spacing commands, currency, percent, a degree sign or unit words."""
    text = _SPACING.sub(" ", text).strip()
    text = re.sub(
        r"^\$(.*)\$$|^\\\((.*)\\\)$", lambda m: m.group(1) or m.group(2) or "", text
    ).strip()  # $...$, \(...\)
    text = re.sub(rf"^{_CURRENCY}\s*", "", text)
    text = re.sub(rf"^({_SIGN})\s*{_CURRENCY}\s*", r"\1", text)  # -$5
    text = re.sub(r"\s*(?:\\%|%|\^\{?\\circ\}?|°)$", "", text)
    text = re.sub(rf"\s*{_UNIT_TEXT}$", "", text).rstrip(".")
    return re.sub(r"^\{(.*)\}$", r"\1", text.strip()).strip()


def _is_fraction_gold(gold: str) -> bool:
    g = _strip_decorations(gold or "")
    m = _FRACTION.fullmatch(g)
    return m is not None and int(m.group(3) or m.group(5)) not in (0, 1)


def number_form(answer: str, gold: str = "") -> str | None:
    """None for a numeral (see the module doc); else why the answer is not one."""
    text = _strip_decorations(answer)
    if not text:
        return f"{answer!r} holds no number"
    if _NUMERAL.fullmatch(text):
        return None
    fraction = _FRACTION.fullmatch(text)
    if fraction:
        num, den = int(fraction.group(2) or fraction.group(4)), int(fraction.group(3) or fraction.group(5))
        if den > 1 and math.gcd(num, den) == 1 and _is_fraction_gold(gold):
            return None
        if not _is_fraction_gold(gold):
            return f"{answer!r} is a fraction to evaluate, not the number itself"
        return f"{answer!r} is not a fraction in lowest terms"
    return f"{answer!r} is an expression to evaluate, not a number"


def math_form(answer: str, gold: str = "") -> str | None:
    """Every answer has the math form; math-verify decides whether it equals the gold."""
    return None


# name -> form; a task names one (task.answer_form), a math reward term may set its own (answer_form: ...); a form of
# the user's is `answer_form: package.module:attr`, a function of the same shape
ANSWER_FORMS: Registry[Callable[[str, str], str | None]] = Registry("answer form", key="answer_form")
ANSWER_FORMS.add("math", math_form, "anything math-verify can compare (MATH-style answers)")
ANSWER_FORMS.add("number", number_form, "a numeral (a fraction in lowest terms where the gold is one); no expressions")


def check_form(form: str, answer: str, gold: str = "") -> str | None:
    """None when `answer` has `form`; else the reason it does not. An unknown form is a ConfigError."""
    return ANSWER_FORMS.get(form)(answer, gold)


__all__ = ["ANSWER_FORMS", "check_form", "number_form", "math_form"]
