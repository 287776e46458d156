"""No caller tests a registered name (issue 48): what a caller needs to know about an entry is a field of the entry
(an answer format's extraction, a scale's inputs, a backend's settings), so a plug-in given as package.module:attr
gets what a built-in gets. The scan: every `==`, `!=`, `in`, `not in` in src/rlvr whose string is a registered name
(of any registry rlvr list shows, or of a choice listed in NOT_YET_REGISTRIES), outside the entry that owns it.

What is allowed is listed below, each with its reason (a string that spells a registered name and means something
else); an entry that no longer occurs fails too, so the list only shrinks."""

import ast
from pathlib import Path

from rlvr.cli.list import registries

SRC = Path(__file__).resolve().parent.parent / "src" / "rlvr"

# Choices that are tuples of strings with branches on them, not yet registries: their names are checked too.
NOT_YET_REGISTRIES: dict[str, tuple[str, ...]] = {}

# (file under src/rlvr, name compared) -> why it is allowed: a string that happens to spell a registered name but
# means something else (the issue 48 "Registries bypassed" lines, not fixed then, are all fixed).
ALLOWED = {
    ("integrations/trl_recipe.py", "token"): "TRL's importance_sampling_level values, mapped onto ours",
    ("integrations/trl_recipe.py", "sequence"): "TRL's importance_sampling_level values, mapped onto ours",
    ("integrations/trl_recipe.py", "none"): "TRL's report_to: none (transformers' TrainingArguments: no tracker)",
    ("tasks/chat.py", "tool"): "a chat message's role",
    ("tasks/demo.py", "none"): "task.settings.demo none",
    ("tasks/tool_arithmetic.py", "calculator"): "the task's own tool call, written in its reference traces",
    ("tasks/tool_arithmetic.py", "python"): "the task's own tool call, written in its reference traces",
    ("verifiers/reasoning_gym_audit.py", "countdown"): "a reasoning-gym family's name",
}


def registered_names() -> dict[str, list[str]]:
    """name -> the registries (and not-yet registries) holding it."""
    names: dict[str, list[str]] = {}
    for what, registry in registries().items():
        for name in registry.names():
            names.setdefault(name, []).append(what)
    for what, choices in NOT_YET_REGISTRIES.items():
        for name in choices:
            names.setdefault(name, []).append(what)
    return names


def _strings(node) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _strings(e)]
    return []


def comparisons(src: Path, names) -> list[tuple[str, int, str]]:
    """(file, line, name) of every comparison in `src` of a value against a registered name."""
    out = []
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            if not all(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
                continue
            for side in (node.left, *node.comparators):
                out += [(path.relative_to(src).as_posix(), node.lineno, s) for s in _strings(side) if s in names]
    return sorted(set(out))


def test_no_registered_name_is_compared_outside_its_entry():
    names = registered_names()
    found = comparisons(SRC, names)
    offenders = [
        f"{f}:{line} {name!r} ({', '.join(names[name])})" for f, line, name in found if (f, name) not in ALLOWED
    ]
    assert offenders == [], "a caller tests a registered name: give the entry a field that says what it needs"
    stale = sorted(set(ALLOWED) - {(f, name) for f, _, name in found})
    assert stale == [], "fixed: remove these from ALLOWED"


def test_the_scan_sees_the_comparisons_this_issue_removed(tmp_path):
    """The shapes the fixed callers had (answer formats, an advantage scale, backends) are found."""
    (tmp_path / "x.py").write_text(
        'a = fmt == "tags"\nb = name in ("hf", "fast")\nc = algo.adv_scale == "batch"\nd = "boxed" != f\n'
        'e = backend == "remote"\nf = status == "correct"\n'
    )
    found = [(line, name) for _, line, name in comparisons(tmp_path, registered_names())]
    assert found == [(1, "tags"), (2, "fast"), (2, "hf"), (3, "batch"), (4, "boxed"), (5, "remote")]
