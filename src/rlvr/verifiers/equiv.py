"""Parsing answers with math-verify, and deciding whether two parsed answers are the same.

Why not math-verify's `verify` alone: it compares numbers after rounding to 6 decimals and chops tiny
differences, so `0.0000013` equals `0.0000012` and `1/2006!` equals `1/2004!`. Here numbers (also inside
tuples, sets, intervals and matrices) are compared exactly when both are rational or integer-valued, and
otherwise with a relative tolerance at high precision. Only symbolic leaves (expressions with
variables, text) go to math-verify's symbolic comparison.
"""

from __future__ import annotations

import logging
from functools import lru_cache

import mpmath
import sympy
from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
from sympy import Basic, FiniteSet, Interval, MatrixBase, Tuple
from sympy.core.relational import Equality

# math-verify warns once that we disabled its signal-based timeout: we enforce our own (deadline.py).
logging.getLogger("math_verify").setLevel(logging.ERROR)

_LATEX = [LatexExtractionConfig(boxed_match_priority=0)]
_LATEX_OR_EXPR = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
# Integers with more digits than this are compared by their leading digits only if not identical.
MAX_EXACT_DIGITS = 5000


def parse_boxed(content: str) -> list:
    """Parse one box's content: [sympy object, text] or [] when math-verify finds nothing."""
    return parse("\\boxed{" + content + "}", extraction_config=_LATEX, parsing_timeout=None)


def parse_free_text(text: str) -> list:
    """math-verify's lenient extraction over a whole completion (last answer-like span)."""
    return parse(text, extraction_config=_LATEX_OR_EXPR, parsing_timeout=None)


@lru_cache(maxsize=4096)
def parse_gold(gold: str) -> tuple:
    """Parse a reference answer in whatever form datasets write it; () when nothing parses.

    Bare LaTeX (`\\sqrt{8}`, `[0, 1)`, `\\infty`, a pmatrix) parses to nothing with math-verify's
    defaults, which would silently zero every reward; wrapping it in a box first fixes that. A gold that
    already carries delimiters is parsed as written.
    """
    gold = gold.strip()
    if not gold:
        return ()
    tries = [gold] if ("$" in gold or "\\boxed" in gold) else []
    tries += ["\\boxed{" + gold + "}", "$" + gold + "$"]
    for text in tries:
        parsed = parse(text, extraction_config=_LATEX_OR_EXPR, parsing_timeout=None)
        if is_parsed(parsed):
            return tuple(parsed)
    return ()


def is_parsed(parsed) -> bool:
    """math-verify returns [text] alone when sympy could not read the text: that is not a parse."""
    return len(parsed) >= 2 and isinstance(parsed[0], (Basic, MatrixBase))


def is_scalar(x) -> bool:
    """A single value (not a set, tuple, interval, matrix or equation)."""
    return not isinstance(x, (FiniteSet, Tuple, Interval, MatrixBase, Equality, sympy.Set, str))


def is_multi(x) -> bool:
    """An answer offering several values at once: a set with more than one element."""
    return isinstance(x, FiniteSet) and len(x) > 1


def numbers_equal(a, b, rel_tol: float) -> bool:
    """Equality of two numeric sympy values: exact for rationals and integers, else relative tolerance.

    NaN equals nothing; infinities equal only themselves.
    """
    a, b = _plain(a), _plain(b)
    if a is sympy.nan or b is sympy.nan or a.has(sympy.nan) or b.has(sympy.nan):
        return False
    if a.is_Rational and b.is_Rational:
        return a == b
    if not (a.is_finite and b.is_finite):
        return a == b
    va, vb = sympy.N(a, 30), sympy.N(b, 30)
    if not (va.is_number and vb.is_number) or va.has(sympy.zoo, sympy.nan) or vb.has(sympy.zoo, sympy.nan):
        return False
    if a.is_integer and b.is_integer:
        return _integers_equal(a, b, va)
    diff, scale = abs(va - vb), max(abs(va), abs(vb))
    return bool(diff == 0 or diff <= rel_tol * scale)


def _plain(x):
    """Drop math-verify's UnevaluatedExpr wrappers (it writes 25% as 25*Unevaluated(1/100))."""
    wrapped = x.atoms(sympy.UnevaluatedExpr)
    return x.xreplace({u: u.args[0] for u in wrapped}) if wrapped else x


def _integers_equal(a, b, approx) -> bool:
    """Exact comparison of integer-valued expressions, at the precision their size needs."""
    if abs(approx) > sympy.Integer(10) ** MAX_EXACT_DIGITS:
        return a == b  # only identical giant expressions; never accept on leading digits alone
    digits = len(str(int(abs(approx)))) if abs(approx) >= 1 else 1
    dps = digits + 20
    with mpmath.workdps(dps):
        return mpmath.nint(mpmath.mpf(sympy.N(a, dps)._mpf_)) == mpmath.nint(mpmath.mpf(sympy.N(b, dps)._mpf_))


def answers_equal(gold, pred, rel_tol: float, pct: tuple[bool, bool] = (False, False)) -> bool:
    """Whether pred is the same answer as gold (both parsed sympy objects or strings).

    pct says whether gold / pred were written as percentages: `25\\%` matches 25 and 0.25.
    """
    if isinstance(gold, Equality) and not isinstance(pred, Equality) and gold.lhs.is_Symbol:
        return answers_equal(gold.rhs, pred, rel_tol, pct)
    if isinstance(pred, Equality) and not isinstance(gold, Equality):
        side = _solved_side(pred)
        return side is not None and answers_equal(gold, side, rel_tol, pct)
    if isinstance(gold, MatrixBase) or isinstance(pred, MatrixBase):
        return _matrices_equal(gold, pred, rel_tol)
    if isinstance(gold, (Tuple, Interval)) or isinstance(pred, (Tuple, Interval)):
        return _sequences_equal(gold, pred, rel_tol)
    if isinstance(gold, FiniteSet) or isinstance(pred, FiniteSet):
        return _sets_equal(gold, pred, rel_tol)
    if _is_number(gold) and _is_number(pred):
        if numbers_equal(gold, pred, rel_tol):
            return True
        return (pct[1] and numbers_equal(gold, pred * 100, rel_tol)) or (
            pct[0] and numbers_equal(gold * 100, pred, rel_tol)
        )
    if _is_number(gold) != _is_number(pred) and not isinstance(gold, str) and not isinstance(pred, str):
        return False  # a variable is never a number
    return bool(verify(gold, pred, strict=True, timeout_seconds=None))


def _is_number(x) -> bool:
    return isinstance(x, sympy.Expr) and x.is_number


def _solved_side(eq: Equality):
    """`x = 3` -> 3 and `3 = x` -> 3; None for `4 = 5` or `x = y` (not an answer to a scalar question)."""
    if eq.lhs.is_Symbol and _is_number(eq.rhs):
        return eq.rhs
    if eq.rhs.is_Symbol and _is_number(eq.lhs):
        return eq.lhs
    return None


def _sequences_equal(gold, pred, rel_tol: float) -> bool:
    """Tuples and intervals. An open interval and a pair read the same in LaTeX: `(1,2)` matches both."""
    if isinstance(gold, Interval) and isinstance(pred, Interval):
        same_ends = gold.left_open == pred.left_open and gold.right_open == pred.right_open
        return same_ends and _all_equal((gold.start, gold.end), (pred.start, pred.end), rel_tol)
    g, p = _as_pair(gold), _as_pair(pred)
    return g is not None and p is not None and _all_equal(g, p, rel_tol)


def _as_pair(x):
    if isinstance(x, Tuple):
        return tuple(x)
    if isinstance(x, Interval) and x.left_open and x.right_open:
        return (x.start, x.end)
    return None


def _all_equal(gs, ps, rel_tol: float) -> bool:
    return len(gs) == len(ps) and all(answers_equal(g, p, rel_tol) for g, p in zip(gs, ps))


def _sets_equal(gold, pred, rel_tol: float) -> bool:
    """Same elements in any order (each gold element matched by a distinct pred element)."""
    if not (isinstance(gold, FiniteSet) and isinstance(pred, FiniteSet)) or len(gold) != len(pred):
        return False
    left = list(pred)
    for g in gold:
        hit = next((i for i, p in enumerate(left) if answers_equal(g, p, rel_tol)), None)
        if hit is None:
            return False
        left.pop(hit)
    return True


def _matrices_equal(gold, pred, rel_tol: float) -> bool:
    if not (isinstance(gold, MatrixBase) and isinstance(pred, MatrixBase)) or gold.shape != pred.shape:
        return False
    return all(answers_equal(g, p, rel_tol) for g, p in zip(gold, pred))
