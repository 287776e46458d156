"""Tool calls in a policy's turn: parsed by a registered format (Hermes / Qwen `<tool_call>{json}</tool_call>` built
in; `package.module:attr` for another), then run. Every failure is text the model gets back, never an exception:
a malformed call gets a short parse error, an unknown tool the list of tools, a tool that raises its error, and each
outcome carries a status the episode counts (ok, parse_error, unknown_tool, bad_arguments, tool_error).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from rlvr.environments.tools import Tool
from rlvr.registry import Registry

CALL_STATUSES = ("ok", "parse_error", "unknown_tool", "bad_arguments", "tool_error")
MAX_ERROR_CHARS = 300


@dataclass(frozen=True)
class ToolCall:
    """One call as the policy wrote it: name and arguments, or `error` (why it could not be read) and the raw text."""

    name: str | None
    arguments: dict = field(default_factory=dict)
    error: str | None = None
    raw: str = ""


@dataclass(frozen=True)
class ToolResult:
    name: str | None
    text: str
    status: str  # one of CALL_STATUSES


# (turn text) -> [ToolCall]: every call the turn makes, in order; no call, an empty list
TOOL_CALL_PARSERS: Registry = Registry("tool call format", key="episode.call_format")

_HERMES = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)


@TOOL_CALL_PARSERS.register("hermes")
def parse_hermes(text: str) -> list[ToolCall]:
    """Hermes / Qwen: <tool_call>{"name": ..., "arguments": {...}}</tool_call>, any number of them."""
    calls = []
    for match in _HERMES.finditer(text):
        raw = match.group(1).strip()
        try:
            body = json.loads(raw)
        except json.JSONDecodeError as e:
            calls.append(ToolCall(None, error=f"not JSON ({e.msg} at character {e.pos})", raw=raw))
            continue
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            calls.append(ToolCall(None, error='expected {"name": "...", "arguments": {...}}', raw=raw))
            continue
        arguments = body.get("arguments", {})
        if isinstance(arguments, str):  # some models write the arguments as a JSON string
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                pass
        if not isinstance(arguments, dict):
            calls.append(ToolCall(body["name"], error="arguments must be a JSON object", raw=raw))
            continue
        calls.append(ToolCall(body["name"], arguments, raw=raw))
    if not calls and "<tool_call>" in text:  # opened and never closed: a truncated call
        calls.append(ToolCall(None, error="<tool_call> without </tool_call>", raw=text.split("<tool_call>", 1)[1]))
    return calls


def run_call(call: ToolCall, tools: dict[str, Tool]) -> ToolResult:
    """Run one parsed call; every failure becomes text for the model and a status for the metrics."""
    if call.error is not None and call.name is None:
        return ToolResult(None, f"Error: could not read the tool call: {call.error}.", "parse_error")
    if call.name not in tools:
        return ToolResult(call.name, f"Error: unknown tool {call.name!r}; tools: {', '.join(tools)}.", "unknown_tool")
    if call.error is not None:
        return ToolResult(call.name, f"Error: {call.error}.", "bad_arguments")
    try:
        value: Any = tools[call.name].fn(**call.arguments)
    except TypeError as e:  # wrong or missing argument names
        return ToolResult(call.name, f"Error: {str(e)[:MAX_ERROR_CHARS]}", "bad_arguments")
    except Exception as e:  # a tool that raises: its error, short, back to the model
        return ToolResult(call.name, f"Error: {type(e).__name__}: {str(e)[:MAX_ERROR_CHARS]}", "tool_error")
    return ToolResult(call.name, value if isinstance(value, str) else json.dumps(value), "ok")


__all__ = ["CALL_STATUSES", "TOOL_CALL_PARSERS", "ToolCall", "ToolResult", "parse_hermes", "run_call"]
