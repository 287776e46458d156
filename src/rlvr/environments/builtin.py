"""The built-in tools. `calculator`: exact arithmetic on an expression, no code run (a parsed tree of numbers and
+ - * / // % ** and parentheses, evaluated over fractions, with bounds so no expression can stall the trainer).
`python`: a program run in rlvr's sandbox (rlvr.verifiers.sandbox: its own uid, rlimits, no network, a fresh temp
dir, a hard deadline, output capped), its output returned.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from fractions import Fraction

from rlvr.environments.tools import Tool, tool_from_function

MAX_EXPONENT = 64  # 10 ** 64 is plenty for arithmetic; 10 ** 10 ** 9 would hold the process for minutes
MAX_DIGITS = 200  # an operand or a result past this many digits is refused
MAX_NODES = 200
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Fraction], Fraction]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _check_size(value: Fraction) -> Fraction:
    if max(len(str(abs(value.numerator))), len(str(value.denominator))) > MAX_DIGITS:
        raise ValueError(f"a number past {MAX_DIGITS} digits")
    return value


def _evaluate(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _check_size(Fraction(str(node.value)))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            if right.denominator != 1 or abs(right) > MAX_EXPONENT:
                raise ValueError(f"exponents must be whole numbers up to {MAX_EXPONENT}")
            return _check_size(Fraction(left ** int(right)))
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and right == 0:
            raise ZeroDivisionError("division by zero")
        return _check_size(Fraction(_BINARY[type(node.op)](left, right)))
    raise ValueError(f"only numbers, + - * / // % ** and parentheses are allowed, not {ast.unparse(node)!r}")


def format_number(value: Fraction) -> str:
    """An integer as digits; a fraction as p/q and its decimal to 12 places."""
    if value.denominator == 1:
        return str(value.numerator)
    return f"{value.numerator}/{value.denominator} (= {float(value):.12g})"


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly.

    Args:
        expression: numbers with + - * / // % ** and parentheses, e.g. "(1234 * 5678) - 91".
    """
    tree = ast.parse(expression.replace("^", "**").replace("×", "*").replace("÷", "/"), mode="eval")
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise ValueError(f"expression longer than {MAX_NODES} parts")
    return format_number(_evaluate(tree.body))


def python_tool(wall_s: float = 5.0, memory_mb: int = 512, output_chars: int = 2000) -> Tool:
    """The `python` tool with these limits: the code runs in the sandbox; stdout (and stderr, when it fails) back."""
    from rlvr.verifiers.sandbox import Limits, run_sandboxed

    limits = Limits(cpu_s=max(1, int(wall_s)), wall_s=wall_s, memory_mb=memory_mb, output_bytes=1 << 16)

    def python(code: str) -> str:
        """Run a Python program (standard library only, no network, a few seconds) and return what it prints.

        Args:
            code: the program; print() what you want to see.
        """
        result = run_sandboxed(code, limits=limits)
        out = result.stdout.decode("utf-8", "replace")
        if result.timed_out:
            return _cap(out + f"\n[stopped: over {wall_s:g} s]", output_chars)
        if result.returncode != 0:
            err = result.stderr.decode("utf-8", "replace").strip().splitlines()
            return _cap(out + "\n" + "\n".join(err[-5:]), output_chars)
        return _cap(out, output_chars)

    return tool_from_function(python)


def _cap(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more characters]"


__all__ = ["calculator", "python_tool", "format_number"]
