"""Refusing answers whose evaluation would be one giant computation, before sympy starts it.

The deadline (deadline.py) interrupts Python code, but not a single C-level big-integer operation:
sympy evaluating `2^{2^{2^{2^{2^{2}}}}}` or `7^{10^{8}}` sits in one multiplication for minutes and
cannot be stopped inside the process (only by killing it, which the pool does). Such answers are
never a correct final answer to a task with a checkable gold, so they are refused up front with
status `timeout` (the issue's status for pathological expressions), reward 0, in microseconds.
Pure string inspection: no parsing, so it cannot hang itself.
"""

from __future__ import annotations

import math
import re

# The start of every refusal's detail: what tells a refusal (no evaluation ran) from a deadline hit (one did and was
# stopped), both status `timeout` (rlvr.serve.metrics counts them apart).
REFUSED = "refused before evaluation"
MAX_POWER_DEPTH = 2  # a^{b^{c}} is allowed when small; a^{b^{c^{d}}} never is
MAX_RESULT_DIGITS = 100_000  # a literal power or factorial with more digits than this is refused
MAX_EXPONENT = 1_000_000  # the exponent of a two-level tower b^c must stay below this

_NUM = r"(\d+(?:\.\d+)?)"
_ARG = r"\s*\{?\s*"
_POW2 = re.compile(_NUM + r"\s*(?:\^|\*\*)" + _ARG + _NUM + r"\s*\}?\s*(?:\^|\*\*)" + _ARG + _NUM)
_POW1 = re.compile(_NUM + r"\s*(?:\^|\*\*)" + _ARG + _NUM)
_FACT = re.compile(r"(\d+)\s*!")
_NESTED_FACT = re.compile(r"[)}!]\s*!|!\s*[)}]\s*!")


def refuse(content: str, max_chars: int) -> tuple[str, str] | None:
    """(status, reason) when the answer text must not be evaluated, else None."""
    if len(content) > max_chars:
        return "wrong", f"answer is {len(content)} characters (limit {max_chars})"
    text = content.replace("**", "^")
    depth = power_depth(text)
    if depth > MAX_POWER_DEPTH:
        return "timeout", f"{REFUSED}: power tower of depth {depth}"
    for m in _POW2.finditer(text):
        base, b, c = (float(x) for x in m.groups())
        if base > 1 and b > 1 and c * math.log10(b) > math.log10(MAX_EXPONENT):
            return "timeout", f"{REFUSED}: {m.group(0)!r} is astronomically large"
    for m in _POW1.finditer(text):
        base, e = float(m.group(1)), float(m.group(2))
        if base > 1 and e * math.log10(base) > MAX_RESULT_DIGITS:
            return "timeout", f"{REFUSED}: {m.group(0)!r} has over {MAX_RESULT_DIGITS} digits"
    for m in _FACT.finditer(text):
        if int(m.group(1)) > 20_000:
            return "timeout", f"{REFUSED}: {m.group(0)!r} is too large"
    if _NESTED_FACT.search(text) and re.search(r"\d{2,}\s*!|[4-9]\s*!", text):
        return "timeout", f"{REFUSED}: factorial of a factorial"
    return None


def power_depth(text: str) -> int:
    """Longest chain of nested exponents: `2^3` is 1, `2^{3^4}` is 2, `2^{2^{2^2}}` and `2^2^2` are 3."""
    best, memo = 0, dict[int, int]()
    for i, c in enumerate(text):
        if c == "^":
            best = max(best, _depth_at(text, i, memo))
    return best


def _depth_at(text: str, caret: int, memo: dict) -> int:
    if caret in memo:
        return memo[caret]
    memo[caret] = 1  # guards against cycles; real value set below
    start = caret + 1
    while start < len(text) and text[start].isspace():
        start += 1
    end = _argument_end(text, start)
    inner = [_depth_at(text, j, memo) for j in range(start, end) if text[j] == "^"]
    nxt = end
    while nxt < len(text) and text[nxt] in " }":
        nxt += 1
    chained = _depth_at(text, nxt, memo) if nxt < len(text) and text[nxt] == "^" else 0
    memo[caret] = 1 + max(inner + [chained, 0]) if inner or chained else 1
    return memo[caret]


def _argument_end(text: str, start: int) -> int:
    """End index (exclusive) of the exponent argument starting at `start`: a {group}, \\cmd, or one char."""
    if start >= len(text):
        return start
    if text[start] == "{":
        depth = 0
        for j in range(start, len(text)):
            depth += text[j] == "{"
            depth -= text[j] == "}"
            if depth == 0:
                return j + 1
        return len(text)
    if text[start] == "\\":
        m = re.match(r"\\[A-Za-z]+", text[start:])
        return start + (m.end() if m else 2)
    if text[start] == "(":
        close = text.find(")", start)
        return len(text) if close < 0 else close + 1
    m = re.match(r"\d+", text[start:])
    return start + (m.end() if m else 1)
