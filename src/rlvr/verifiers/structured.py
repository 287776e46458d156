"""Verifiers for answers with structure: an ordered list of numbers, a countdown expression, normalised text.

- `ordered_list`: the final boxed answer is a list of numbers in order; `['52.2', '30.0']`, `[52.2, 30]` and
  `52.2, 30.0` are the same list (numbers compare by value, quotes and brackets are notation). Each item must be
  a numeral (forms.number_form): `[8-3, 2]` is not a list of numbers.
- `countdown`: the final boxed answer is an arithmetic expression that uses only the problem's numbers, each at
  most as often as given, and evaluates exactly (fractions, no float rounding) to the target. The target itself,
  a number used twice, or a number not given is wrong. `problem.meta["entry"]["metadata"]` holds numbers and target.
Hedging rules are the math verifier's (extract.py): several different final boxes are `multiple_answers`.
"""

from __future__ import annotations

import ast
import operator
import re
from collections import Counter
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from rlvr.tasks import forms
from rlvr.verifiers import extract
from rlvr.verifiers.base import Verdict
from rlvr.verifiers.format import completion_text


def final_box(completion) -> str | Verdict:
    """The final boxed answer, or the verdict when there is no single one."""
    text = completion_text(completion)
    boxes = extract.find_boxes(text)
    if not boxes:
        return Verdict("no_answer", 0.0, None, "no \\boxed{} answer")
    group = extract.final_group(text, boxes, "last")
    contents = list(dict.fromkeys(b.content.strip() for b in group))
    if len(contents) > 1:
        return Verdict("multiple_answers", 0.0, " | ".join(contents), f"{len(contents)} different boxed answers")
    if extract.prose_hedge_around(text, group):
        return Verdict("multiple_answers", 0.0, contents[0], "another answer offered in prose")
    return contents[0]


def parse_number_list(text: str) -> list[Decimal] | None:
    """'[\\'52.2\\', \\'30.0\\']', '[52.2, 30]', '52.2, 30.0' -> [Decimal('52.2'), Decimal('30')]; None if any item
    is not a numeral."""
    text = re.sub(r"\\(?:left|right)", "", text or "").strip()
    text = re.sub(r"^\\?[\[(]|\\?[\])]$", "", text).strip()
    items = [i.strip().strip("'\"").strip() for i in text.split(",")] if text else []
    out = []
    for item in items:
        if not item or forms.number_form(item):
            return None
        try:
            out.append(Decimal(re.sub(r"[^\d.\-+]", "", item.replace("−", "-"))))
        except InvalidOperation:
            return None
    return out


class OrderedListVerifier:
    name = "ordered_list"

    def score(self, completion, problem) -> Verdict:
        gold = parse_number_list(str(getattr(problem, "answer", problem) or ""))
        if not gold:
            return Verdict("invalid_gold", 0.0, None, "gold is not a list of numbers")
        answer = final_box(completion)
        if isinstance(answer, Verdict):
            return answer
        got = parse_number_list(answer)
        if got is None:
            return Verdict("wrong", 0.0, answer, "answer form ordered list: not a list of numbers")
        ok = got == gold
        return Verdict("correct" if ok else "wrong", float(ok), answer, "same list" if ok else "differs from gold")


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_ALLOWED = (ast.Expression, ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Constant, ast.UnaryOp, ast.USub)


def countdown_value(expression: str) -> tuple[Fraction, Counter]:
    """(exact value, multiset of the numbers used) of an arithmetic expression; ValueError if it is not one."""
    text = expression.replace("×", "*").replace("\\times", "*").replace("÷", "/").replace("\\div", "/")
    text = text.replace("\\cdot", "*").replace("\\left", "").replace("\\right", "").replace("{", "(").replace("}", ")")
    tree = ast.parse(text.strip(), mode="eval")
    used: Counter = Counter()

    def value(node: ast.AST) -> Fraction:
        if not isinstance(node, _ALLOWED) or (isinstance(node, ast.Constant) and type(node.value) is not int):
            raise ValueError(f"not allowed in a countdown answer: {ast.dump(node)[:60]}")
        if isinstance(node, ast.Expression):
            return value(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):  # an int exactly (checked above)
            used[node.value] += 1
            return Fraction(node.value)
        if isinstance(node, ast.UnaryOp):
            return -value(node.operand)
        if not isinstance(node, ast.BinOp):  # an operator (ast.Add, ...) alone is never a value
            raise ValueError(f"not allowed in a countdown answer: {ast.dump(node)[:60]}")
        left, right = value(node.left), value(node.right)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ValueError("division by zero")
        return _OPS[type(node.op)](left, right)

    return value(tree), used


class CountdownVerifier:
    name = "countdown"

    def score(self, completion, problem) -> Verdict:
        meta = (getattr(problem, "meta", None) or {}).get("entry", {}).get("metadata", {})
        numbers, target = meta.get("numbers"), meta.get("target")
        if not numbers or target is None:
            return Verdict("invalid_gold", 0.0, None, "no numbers and target for this countdown problem")
        answer = final_box(completion)
        if isinstance(answer, Verdict):
            return answer
        expression = re.sub(rf"\s*=\s*{int(target)}\s*$", "", answer)  # "... = 309" states the target: allowed
        try:
            value, used = countdown_value(expression)
        except (SyntaxError, ValueError, TypeError, RecursionError) as e:
            return Verdict("wrong", 0.0, answer, f"not an arithmetic expression of the numbers: {str(e)[:80]}")
        extra = used - Counter(int(n) for n in numbers)
        if extra:
            return Verdict("wrong", 0.0, answer, f"uses numbers not given, or more often than given: {dict(extra)}")
        ok = value == target
        return Verdict("correct" if ok else "wrong", float(ok), answer, "reaches the target" if ok else f"= {value}")


class TextVerifier:
    """The final boxed answer as text: case, spacing and surrounding quotes folded away, then equal to the gold.
    Hedges (two boxes, an alternative in prose) are multiple_answers, as for numbers."""

    name = "text"

    @staticmethod
    def normal(text: str) -> str:
        text = re.sub(r"\\text\{([^{}]*)\}", r"\1", text or "")
        return " ".join(text.strip().strip("'\"").casefold().split())

    def score(self, completion, problem) -> Verdict:
        gold = self.normal(str(getattr(problem, "answer", problem) or ""))
        if not gold:
            return Verdict("invalid_gold", 0.0, None, "empty gold")
        answer = final_box(completion)
        if isinstance(answer, Verdict):
            return answer
        ok = self.normal(answer) == gold
        return Verdict("correct" if ok else "wrong", float(ok), answer, "same text" if ok else "differs from gold")


__all__ = [
    "OrderedListVerifier",
    "CountdownVerifier",
    "TextVerifier",
    "parse_number_list",
    "countdown_value",
    "final_box",
]
