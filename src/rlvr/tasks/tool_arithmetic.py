"""Arithmetic the start model cannot do in its head, for episodes with a calculator or python tool: products of
3- to 5-digit numbers and two-step expressions, in bands, the final answer boxed and graded in the number form.

Each problem carries a reference tool-use trace (meta["trace"]: the assistant's call, the tool's result, the boxed
answer, as chat messages) written from the problem itself, so the supervised baseline can learn the call format the
135M model has never seen (`sft.source: reference`). The prompt shows one solved exchange with a tool call, as
the default task shows one boxed answer. Splits by the arithmetic fact's hash (rlvr.tasks.arithmetic.split_of).
"""

from __future__ import annotations

import hashlib
import json
import random

from rlvr.tasks.arithmetic import split_of
from rlvr.tasks.base import SPLITS, Problem, SplitTask, math_grader

# band -> (digits of a, digits of b, the expression's shape)
BANDS = {
    "3x2": (3, 2, "{a} * {b}"),
    "4x3": (4, 3, "{a} * {b}"),
    "5x4": (5, 4, "{a} * {b}"),
    "two-step": (3, 3, "{a} * {b} - {c}"),
}
SYSTEM = (
    "You are a careful assistant with a calculator. Do not compute in your head: call the calculator with the "
    "expression, read its result, then give the final answer inside \\boxed{}."
)


def tool_call(name: str, **arguments) -> str:
    """A call in the Hermes / Qwen form the `hermes` parser reads."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def trace(expression: str, value: int, tool: str = "calculator") -> list[dict]:
    """The reference episode after the question: the call, the tool's answer, the boxed result."""
    call = (
        tool_call("calculator", expression=expression)
        if tool == "calculator"
        else tool_call("python", code=f"print({expression})")
    )
    return [
        {"role": "assistant", "content": call},
        {"role": "tool", "content": str(value)},
        {"role": "assistant", "content": f"{expression} = {value}.\n\\boxed{{{value}}}"},
    ]


ONE_SHOT = [{"role": "user", "content": "What is 312 * 45?"}, *trace("312 * 45", 14040)]
# without tools (the no_tools control): the same question answered in the head, as the default task's one-shot does
SYSTEM_NO_TOOLS = "Compute the answer carefully. Put the final answer inside \\boxed{}."
ONE_SHOT_NO_TOOLS = [ONE_SHOT[0], {"role": "assistant", "content": "312 * 45 = 14040.\n\\boxed{14040}"}]


def _number(rng: random.Random, digits: int) -> int:
    return rng.randint(10 ** (digits - 1), 10**digits - 1)


def make_problem(rng: random.Random, band: str, tool: str = "calculator") -> Problem:
    da, db, shape = BANDS[band]
    a, b, c = _number(rng, da), _number(rng, db), _number(rng, 4)
    expression = shape.format(a=a, b=b, c=c)
    value = a * b - c if "{c}" in shape else a * b
    text = f"What is {expression}?"
    pid = "toolarith-" + hashlib.sha256(f"{band}|{text}".encode()).hexdigest()[:16]
    meta = {"fact": f"{band}|{expression}", "expression": expression, "trace": trace(expression, value, tool)}
    return Problem(id=pid, prompt=text, answer=str(value), band=band, meta=meta)


class ToolArithmeticTask(SplitTask):
    """Products and two-step expressions past the model's head arithmetic, for the `tool` environment."""

    name = "tool_arithmetic"
    answer_form = "number"
    answer_format = "boxed"
    grader = math_grader("number")

    without_tools = {"with_tools": False}  # the settings of the same task asked without tools (controls)

    def __init__(
        self,
        seed: int = 0,
        per_band: int = 500,
        bands=tuple(BANDS),
        one_shot: bool = True,
        tool="calculator",
        with_tools: bool = True,
    ):
        unknown = [b for b in bands if b not in BANDS]
        if unknown:
            raise ValueError(f"tool_arithmetic bands {unknown}: choose from {', '.join(BANDS)}")
        if tool not in ("calculator", "python"):
            raise ValueError(f"tool_arithmetic tool {tool!r}: choose from calculator, python")
        self.bands, self.one_shot, self.with_tools = list(bands), one_shot, with_tools
        rng, pool, seen = random.Random(seed), list[Problem](), set[str]()
        for band in self.bands:
            for _ in range(per_band * 20):
                if sum(p.band == band for p in pool) >= per_band:
                    break
                p = make_problem(rng, band, tool)
                if p.id not in seen:
                    seen.add(p.id)
                    pool.append(p)
        self._splits = {s: [p for p in pool if split_of(p.meta["fact"]) == s] for s in SPLITS}

    def messages(self, problem: Problem) -> list[dict]:
        """The system prompt, one solved exchange (with a tool call, or without tools), the question."""
        system, shot = (SYSTEM, ONE_SHOT) if self.with_tools else (SYSTEM_NO_TOOLS, ONE_SHOT_NO_TOOLS)
        return [
            {"role": "system", "content": system},
            *(shot if self.one_shot else []),
            {"role": "user", "content": problem.prompt},
        ]


__all__ = ["ToolArithmeticTask", "BANDS", "trace", "tool_call", "make_problem"]
