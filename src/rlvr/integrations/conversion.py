"""The result of converting a peer's recipe into an rlvr config: the config, the keys that could not be mapped and
why, notes on how keys were read; read from YAML, reported one line a key, rendered as YAML headed by the report."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import yaml

from rlvr.errors import ConfigError
from rlvr.yaml_io import load_yaml, lookup


@dataclass
class Conversion:
    """config: the rlvr config the recipe maps to (only the keys it sets); unmapped: (key, why); refused: (key, why)
    for keys the recipe's own framework would refuse (a misspelling, mostly); notes: how particular keys were read,
    the TRL defaults used, the shaping-rule report."""

    config: dict = field(default_factory=dict)
    unmapped: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    refused: list = field(default_factory=list)

    def set(self, dotted: str, value) -> None:
        node = self.config
        *parents, leaf = dotted.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value

    def get(self, dotted: str, default=None):
        found, value = lookup(self.config, dotted)
        return value if found else default


def read_recipe(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = load_yaml(f.read(), f"recipe {path}") or {}
    except OSError as e:
        raise ConfigError(f"recipe {path}: {e.strerror or e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"recipe {path}: expected a mapping of GRPOConfig keys")
    return data


def report(conv: Conversion, source: str = "the recipe") -> str:
    """What was read how, every key the framework would refuse and every key not mapped with its reason, one per
    line."""
    lines = [f"rlvr convert-config: {source}"]
    lines += [f"  note: {n}" for n in conv.notes]
    lines += [f"  refused by TRL: {k}: {why}" for k, why in conv.refused]
    lines += [f"  not mapped: {k}: {why}" for k, why in conv.unmapped]
    if not conv.unmapped and not conv.refused:
        lines.append("  every key mapped")
    return "\n".join(lines)


def refused_line(conv: Conversion, source: str) -> str | None:
    """The one line `rlvr train --from-trl` stops with when the recipe holds keys its framework would refuse."""
    if not conv.refused:
        return None
    return f"recipe {source}: " + "; ".join(f"{k}: {why}" for k, why in conv.refused)


def render(conv: Conversion, source: str = "the recipe") -> str:
    """The rlvr config as YAML, headed by the report as comments."""
    head = "".join(f"# {line}\n" for line in report(conv, source).splitlines())
    return head + yaml.safe_dump(copy.deepcopy(conv.config), sort_keys=False, allow_unicode=True)


__all__ = ["Conversion", "read_recipe", "report", "refused_line", "render"]
