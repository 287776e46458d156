"""A tool of your own and the function that writes its reference traces (docs/your-data.md, "Your own tool").

`unit_price` is offered to the model in episodes (`episode.tools: [mytools:unit_price]`). `reference_trace` writes,
for one row of train.jsonl, the exchange a model that uses the tool would have: its call(s), then the answer in
\\boxed{}. rlvr runs the calls through the tool itself and puts the tool's results between the turns
(`sft.reference: mytools:reference_trace`), so a trace cannot disagree with the tool; a trace whose answer the
task's grader does not call correct is dropped and counted. Import it with this folder on PYTHONPATH.
"""

from __future__ import annotations

import json


def unit_price(price: float, count: int, buy: int = 1) -> float:
    """The price of `buy` items when `count` of them cost `price` together, rounded to the cent.

    Args:
        price: what `count` items cost together, in dollars
        count: how many items that price buys
        buy: how many items to price (1 for the price of one item)
    """
    if count <= 0 or buy <= 0:
        raise ValueError("count and buy must be positive")
    return round(price / count * buy, 2)


def call(**arguments) -> str:
    """A unit_price call in the Hermes form rlvr's episodes parse (episode.call_format: hermes)."""
    return "<tool_call>\n" + json.dumps({"name": "unit_price", "arguments": arguments}) + "\n</tool_call>"


def money(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def reference_trace(problem) -> list[dict]:
    """The assistant's turns for one row: a call with each of the row's offers (its columns `offers`: [[price,
    count], ...], and `buy`), then the answer, the lowest of the prices (the only one where there is one offer).
    The tool messages are left out: rlvr writes them by running the tool."""
    offers, buy = problem.meta["offers"], problem.meta.get("buy", 1)
    calls = [call(price=price, count=count, buy=buy) for price, count in offers]  # <tool_call>{...}</tool_call>
    value = min(unit_price(price, count, buy) for price, count in offers)
    return [
        {"role": "assistant", "content": "\n".join(calls)},
        {"role": "assistant", "content": f"That is {money(value)} dollars.\n\\boxed{{{money(value)}}}"},
    ]
