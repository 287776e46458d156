"""How a config field is declared, and the one rule a value is checked by.

A section's field says what its value may be in its metadata: `choice` (one of a fixed set), `registered` (a name in
one of rlvr's registries, or `package.module:attr`), `each` (a list of either), `in_range` (a number between bounds),
`open_field` (free-form, checked by the component that reads it). `check_value` and `each_value` check one value
against that metadata, for every leaf rlvr.config.merge sees and every field of rlvr.algorithms.Algorithm: a mistake
is one line naming the key. A registry's names are not known here (the registries live in later packages, which
this one may not import): merge checks such a value's type, and `check_name` its name against the registry, called
with the registry's names by rlvr.training.lifecycle.check_registered before any run starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any

from rlvr.errors import ConfigError
from rlvr.registry import is_plugin

NO_ITEMS = ("", "none")  # words for an empty list (log.report_to: none, as Hugging Face writes it), no registry's


def choice(default, *others):
    """A field whose value must be the default or one of `others` (checked by `merge`)."""
    return field(default=default, metadata={"choices": (default, *others)})


def registered(default: str, registry: str, where: str | None = None):
    """A field naming an entry of the registry whose `what` is `registry` (rlvr.registry.ALL: "sampler backend"), or
    a `package.module:attr` of the user's (an extension point: the registry resolves it when it is built). The
    registry is the one list of names: `check_registered` checks the value against it. `where`: the entries' boolean
    attribute that says this key may name one, where a key takes only some of its registry's (reward.control: a
    reward control's `on_reward`)."""
    return field(default=default, metadata={"registry": registry, "where": where})


def each(*choices, registry: str | None = None, where: str | None = None, plugin: bool = False):
    """A list field (default: empty) whose items must each be one of `choices`, or of the registry `registry` (as
    `registered`, `where` too), or with `plugin` a `package.module:attr` reference; a comma-separated string is read
    as the list it names ("tensorboard,mlflow"), and "none" as the empty list (checked by `merge`)."""
    return field(
        default_factory=list, metadata={"each": choices, "registry": registry, "where": where, "plugin": plugin}
    )


def in_range(default: Any, low: float | None = None, high: float | None = None, *, above=False, below=False) -> Any:
    """A number that must be >= low (> low with `above`) and <= high (< high with `below`), checked by `check_value`
    for the config and the algorithm's fields alike: a negative step count or learning rate is refused at once."""
    return field(default=default, metadata={"range": (low, high, above, below)})


def auto_or_range(low: float | None = None, high: float | None = None, *, above=False, below=False) -> Any:
    """A number as `in_range` checks it, or "auto" (the default), made concrete when the config resolves
    (rlvr.config.resolve_auto) so that a run's config.yaml records the number it used."""
    return field(default="auto", metadata={"range": (low, high, above, below), "auto": True})


def open_field(factory):
    """A field read by another component, which validates it itself (task settings, reward terms, ...)."""
    return field(default_factory=factory, metadata={"open": True})


def check_value(path: str, value: Any, default: Any, meta: Mapping[str, Any]) -> Any:
    """A setting against its default's type and its field's choices and range (one line naming the key if not);
    an int where a float is due becomes the float. For every leaf of `merge` and every field of Algorithm. A field
    that may be "auto" (`auto_or_range`) takes it, or a float, whatever it holds now."""
    if meta.get("auto"):
        if value == "auto":
            return value
        default = 0.0  # otherwise a number, checked as one
    if isinstance(default, bool) or isinstance(value, bool):  # True is an int to Python, never to a config
        type_ok = isinstance(value, bool) and isinstance(default, bool)
    else:
        type_ok = isinstance(value, (int, float) if isinstance(default, float) else type(default))
    if not type_ok:
        allowed = f"{type(default).__name__}{' or auto' if meta.get('auto') else ''}"
        raise ConfigError(f"config key '{path}' must be {allowed}, got {value!r}")
    if "choices" in meta:
        check_choice(path, value, meta["choices"], meta.get("plugin", False))
    low, high, above, below = meta.get("range", (None, None, False, False))
    if (low is not None and (value <= low if above else value < low)) or (
        high is not None and (value >= high if below else value > high)
    ):
        bounds = [f"{'>' if above else '>='} {low:g}"] if low is not None else []
        bounds += [f"{'<' if below else '<='} {high:g}"] if high is not None else []
        raise ConfigError(f"config key '{path}' = {value!r}; must be {' and '.join(bounds)}")
    return float(value) if isinstance(default, float) else value


def check_choice(path: str, value: Any, choices: Sequence[str], plugin: bool) -> None:
    """`value` is one of `choices` (or, with `plugin`, package.module:attr); else one line naming the key."""
    if value not in choices and not (plugin and is_plugin(value)):
        raise ConfigError(f"config key '{path}' = {value!r}; choose from {', '.join(choices)}")


def check_name(path: str, value: Any, names: Sequence[str]) -> None:
    """A registry-backed key's value (`registered`, or each item of an `each(registry=...)` list) against the
    registry's `names`, or package.module:attr (imported later, by the registry, when the run builds it)."""
    if isinstance(value, list):
        each_value(path, value, {"each": names, "plugin": True})
    else:
        check_choice(path, value, names, plugin=True)


def each_value(path: str, value, meta: Mapping[str, Any]) -> list:
    """A list whose items are each one of meta["each"] (or, with meta["plugin"], package.module:attr), duplicates
    dropped; "a,b" -> [a, b]; "none" or "" -> []. A registry's names (meta["registry"]) are checked by `check_name`."""
    if isinstance(value, str):
        value = [] if value.strip().lower() in NO_ITEMS else [v.strip() for v in value.split(",")]
    if not isinstance(value, list):
        raise ConfigError(f"config key '{path}' must be a list, got {value!r}")
    if meta.get("registry"):  # its names are the registry's, checked by check_name; here that each item is a name
        bad = [v for v in value if not isinstance(v, str)]
        if bad:
            raise ConfigError(f"config key '{path}' lists {bad[0]!r}; each item must be str")
        return list(dict.fromkeys(value))
    bad = [v for v in value if v not in meta["each"] and not (meta.get("plugin") and is_plugin(v))]
    if bad:
        raise ConfigError(f"config key '{path}' lists {bad[0]!r}; choose from {', '.join(meta['each'])}")
    return list(dict.fromkeys(value))
