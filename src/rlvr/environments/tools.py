"""A tool is a typed Python function with a docstring: its name, its description (the docstring's first paragraph),
and one typed parameter per argument, each described in the docstring's `Args:` section (Google style, as TRL and
the chat templates' `tools` read them). `tool_from_function` turns such a function into a `Tool` with its JSON
schema, and refuses one it cannot describe (no docstring, an argument without a type or without a line in `Args:`),
naming the function and what is missing.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlvr.errors import ConfigError

# Python annotation -> JSON schema type
JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


@dataclass(frozen=True)
class Tool:
    """name, the function, and its schema {"type": "function", "function": {name, description, parameters}}."""

    name: str
    fn: Callable[..., Any]
    schema: dict


def _json_type(annotation, where: str) -> dict:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:  # X | None: optional X
        annotation = args[0]
    origin = typing.get_origin(annotation) or annotation
    if origin in JSON_TYPES:
        out: dict[str, Any] = {"type": JSON_TYPES[origin]}
        items = typing.get_args(annotation)
        if origin is list and items and items[0] in JSON_TYPES:
            out["items"] = {"type": JSON_TYPES[items[0]]}
        return out
    raise ConfigError(
        f"{where}: type {annotation!r} has no JSON schema type; use one of {', '.join(t.__name__ for t in JSON_TYPES)}"
    )


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(description: the text before `Args:`, {argument: its description}) of a Google-style docstring."""
    doc = inspect.cleandoc(doc or "")
    head, _, rest = doc.partition("\nArgs:")
    described: dict[str, str] = {}
    current = None
    for line in rest.splitlines():
        if re.match(r"^\S", line):  # a new section (Returns:, Raises:) ends Args
            break
        match = re.match(r"^\s+(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line)
        if match:
            current = match.group(1)
            described[current] = match.group(2).strip()
        elif current and line.strip():
            described[current] += " " + line.strip()
    return " ".join(head.split()), described


def tool_from_function(fn: Callable[..., Any], name: str | None = None) -> Tool:
    """The Tool of a typed function with a Google-style docstring; ConfigError naming what is missing."""
    where = f"tool {getattr(fn, '__qualname__', fn)!r}"
    doc = inspect.getdoc(fn)
    if not doc:
        raise ConfigError(f"{where}: no docstring; a tool needs one (its description and an Args: line per argument)")
    description, described = parse_docstring(doc)
    hints = typing.get_type_hints(fn)
    properties, required = {}, []
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigError(f"{where}: *{param.name} cannot be described; give each argument a name and a type")
        if param.name not in hints:
            raise ConfigError(f"{where}: argument {param.name!r} has no type annotation")
        if param.name not in described:
            raise ConfigError(f"{where}: argument {param.name!r} has no line in the docstring's Args: section")
        properties[param.name] = {
            **_json_type(hints[param.name], f"{where} argument {param.name!r}"),
            "description": described[param.name],
        }
        if param.default is param.empty:
            required.append(param.name)
    tool_name = name or fn.__name__
    parameters = {"type": "object", "properties": properties, "required": required}
    return Tool(
        tool_name,
        fn,
        {"type": "function", "function": {"name": tool_name, "description": description, "parameters": parameters}},
    )


__all__ = ["Tool", "tool_from_function", "parse_docstring", "JSON_TYPES"]
