"""`rlvr list [WHAT]`: every extension point's registered names, one line each; WHAT narrows it to one registry
(a word of its name: `rlvr list task`, `rlvr list loss`). Each also takes `package.module:attr` (docs/extending.md)."""

from __future__ import annotations

import importlib

# the modules whose import fills rlvr.registry.ALL, in data order
REGISTRY_MODULES = (
    "rlvr.config",
    "rlvr.tasks",
    "rlvr.tasks.forms",
    "rlvr.prompts.curriculum",
    "rlvr.verifiers.registry",
    "rlvr.verifiers.controls",
    "rlvr.environments.build",
    "rlvr.algorithms",
    "rlvr.algorithms.correction",
    "rlvr.sampling",
    "rlvr.rundir.trackers",
)


def add_parser(subparsers):
    p = subparsers.add_parser(
        "list",
        help="every registry's names (tasks, verifier kinds, losses, backends, ...)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("what", nargs="?", help="one registry, by a word of its name (task, kind, loss, backend, ...)")
    return p


def registries() -> dict:
    """Every registry by what it holds ("task", "verifier kind", ...), the modules that define them imported."""
    for module in REGISTRY_MODULES:
        importlib.import_module(module)
    from rlvr.registry import ALL

    return dict(ALL)


def _short(doc: str, limit: int = 96) -> str:
    """A description cut to `limit` characters."""
    return doc if len(doc) <= limit else doc[: limit - 3].rstrip() + "..."


def render(found: dict) -> str:
    lines = []
    for what, registry in found.items():
        lines.append(f"{what} ({registry.key}):")
        width = max((len(e.name) for e in registry.entries()), default=0)
        lines += [f"  {e.name:<{width}}  {_short(e.doc)}".rstrip() for e in registry.entries()]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def run(args) -> int:
    from rlvr.registry import ConfigError

    found = registries()
    if args.what:
        found = {w: r for w, r in found.items() if args.what.lower() in w or args.what.lower() in r.key}
        if not found:
            raise ConfigError(f"rlvr list {args.what!r}: no such registry; choose from {', '.join(registries())}")
    print(render(found), end="")
    return 0
