"""One registry shape for every extension point: name -> entry, a one-line description each, and `module:attr`.

Tasks, verifier kinds, answer forms, sampler backends, trackers, curricula, advantage scales, the loss's ratio
levels, surrogates and aggregations, algorithm presets and config presets are all `Registry` objects. Wherever a
config or a command accepts one of their names, it also accepts `package.module:attr`, which imports the user's
own module and takes the attribute (a class or a function of the same shape as the registry's entries): a task,
a grader or a loss written outside rlvr plugs in without editing it. An unknown name and a failed import are both
a one-line `ConfigError` naming the key, the value and the choices.

    TASKS = Registry("task", key="task.name")
    TASKS.add("arithmetic", make_arithmetic, "arithmetic word problems in bands")
    TASKS.get("arithmetic")           # the entry
    TASKS.get("my_pkg.tasks:MyTask")  # the user's class, imported
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from rlvr.errors import ConfigError

T = TypeVar("T")

ALL: dict[str, Registry] = {}  # every registry by its `what`, for `rlvr list`


def is_plugin(name: object) -> bool:
    """A `package.module:attr` reference rather than a registered name."""
    return isinstance(name, str) and ":" in name and not name.startswith(":")


def load_attr(ref: str, key: str = "name") -> Any:
    """Import `package.module:attr` (attr may be dotted) and return the attribute; ConfigError in one line."""
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"{key}={ref!r}: write package.module:attr")
    try:
        obj = importlib.import_module(module_name)
    except Exception as e:  # an ImportError, or the user's module failing as it runs: either way one line
        raise ConfigError(f"{key}={ref!r}: cannot import {module_name!r} ({type(e).__name__}: {e})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{key}={ref!r}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Entry(Generic[T]):
    name: str
    value: T
    doc: str


class Registry(Generic[T]):
    """name -> entry with a one-line description; `get` also takes `package.module:attr`.

    what: what an entry is, in the error messages and `rlvr list` ("task", "verifier kind").
    key: the config key that names an entry, for errors ("task.name").
    plugin: turns a user's imported object into an entry of this registry's shape (default: as it is).
    """

    def __init__(self, what: str, key: str, plugin: Callable[[Any, str], T] | None = None, listed: bool = True):
        self.what, self.key = what, key
        self._entries: dict[str, Entry[T]] = {}
        self._plugin = plugin
        self._plugins: dict[str, T] = {}
        if listed:
            ALL[what] = self

    def add(self, name: str, value: T, doc: str = "") -> T:
        """Register `value` under `name` (replacing one of the same name); returns the value."""
        if is_plugin(name):
            raise ValueError(f"{self.what} name {name!r} must not contain ':' (reserved for module:attr)")
        self._entries[name] = Entry(name, value, doc.strip().splitlines()[0] if doc.strip() else "")
        return value

    def remove(self, name: str) -> None:
        """Forget `name` (a test's temporary entry); no error when it is not there."""
        self._entries.pop(name, None)

    def register(self, name: str, doc: str | None = None) -> Callable[[T], T]:
        """Decorator form of `add`; the description defaults to the first line of the object's docstring."""

        def wrap(value: T) -> T:
            self.add(name, value, doc if doc is not None else (getattr(value, "__doc__", None) or ""))
            return value

        return wrap

    def get(self, name: str, key: str | None = None) -> T:
        """The entry called `name`, or the user's object for `package.module:attr`; ConfigError otherwise."""
        key = key or self.key
        if is_plugin(name):
            if name not in self._plugins:
                obj = load_attr(name, key)
                self._plugins[name] = self._plugin(obj, name) if self._plugin else obj
            return self._plugins[name]
        if name not in self._entries:
            raise ConfigError(f"{key}: unknown {self.what} {name!r}; choose from {self.choices()}")
        return self._entries[name].value

    def check(self, name: str, key: str | None = None) -> str:
        """`name` if it resolves (a registered name, or a plugin that imports); ConfigError otherwise."""
        self.get(name, key)
        return name

    def choices(self) -> str:
        return ", ".join(self._entries) + ", or package.module:attr"

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def entries(self) -> list[Entry[T]]:
        return list(self._entries.values())

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, name: str) -> T:
        return self.get(name)


__all__ = ["ALL", "ConfigError", "Entry", "Registry", "is_plugin", "load_attr"]
