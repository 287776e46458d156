"""YAML read the way rlvr reads configs everywhere (config files, --set values, recipes): PyYAML's safe loader with
YAML 1.2's floats, and a syntax error as one line naming where, the line and the column. A leaf: config and the
commands that read YAML import it."""

from __future__ import annotations

import re
from typing import Any

import yaml

from rlvr.errors import ConfigError


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader (YAML 1.1), with YAML 1.2's floats: '1e-5', as people write learning rates, is a
    float (YAML 1.1 wants a dot, '1.0e-5', and reads '1e-5' as a string)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)[eE][-+]?[0-9]+$"), list("-+0123456789.")
)


def load_yaml(text: str, where: str):
    """YAML text read as configs are read everywhere (`_Loader`); a syntax error is a one-line ConfigError
    naming `where`, the line and the column."""
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{where}: not valid YAML ({getattr(e, 'problem', None) or e}{at})") from None


def parse_set(item: str) -> dict:
    """'train.lr=1e-5' -> {'train': {'lr': 1e-05}} (the value is read as YAML)."""
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected key=value")
    key, raw = item.split("=", 1)
    value = load_yaml(raw, f"--set {item!r}") if raw.strip() else ""
    nested: Any = value  # the value, then {part: ...} around it, innermost key first
    for part in reversed(key.strip().split(".")):
        nested = DottedKey({part: nested})
    return nested


class DottedKey(dict):
    """A mapping made from a dotted `--set` key (`algorithm.clip_high=0.3` -> {"clip_high": 0.3} under
    "algorithm"): inside an open section it sets that one key and keeps the section's others, where a mapping
    given whole (`--set 'algorithm={preset: dapo}'`, a YAML file) replaces the section."""


def lookup(cfg: dict, key: str) -> tuple[bool, object]:
    """(whether the nested dict has the dotted key, e.g. "episode.environment", and its value or None)."""
    node = cfg
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


__all__ = ["load_yaml", "parse_set", "DottedKey", "lookup"]
