"""Verifier kinds by name: the one table that config files, `rlvr verify` and `rlvr audit` look up.

A kind is data: how to build it, which settings it takes, its maximum reward (for composition's
dominance rule), and whether it is cheap enough to score in-process. Another module adds its own
kind with `register_kind` (the code verifier registers `python_tests` this way). Factories import
their module lazily, so reading the registry does not load sympy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from rlvr.config import ConfigError


@dataclass(frozen=True)
class Kind:
    """factory(**settings) -> a verifier (has .name and .score(completion, problem) -> Verdict)."""

    factory: Callable[..., object]
    settings: tuple[str, ...]
    max_reward: float = 1.0
    cheap: bool = False  # pure string work: scored in-process, no worker pool needed
    doc: str = ""


KINDS: dict[str, Kind] = {}


def register_kind(name: str, factory: Callable[..., object], settings: tuple[str, ...] = (),
                  max_reward: float = 1.0, cheap: bool = False, doc: str = "") -> None:
    """Add (or replace) a verifier kind; `settings` are the keyword arguments a config may pass."""
    KINDS[name] = Kind(factory, tuple(settings), float(max_reward), bool(cheap), doc)


def build_verifier(kind: str, settings: dict | None = None, where: str = "verifier"):
    """Construct a verifier of `kind`; a wrong kind or setting is a ConfigError naming key and choices."""
    if kind not in KINDS:
        raise ConfigError(f"{where}.kind: unknown kind {kind!r}; choose from {', '.join(sorted(KINDS))}")
    spec, settings = KINDS[kind], dict(settings or {})
    for key in settings:
        if key not in spec.settings:
            allowed = ", ".join(spec.settings) or "(none)"
            raise ConfigError(f"{where}.{key}: unknown setting for kind {kind!r}; choose from {allowed}")
    try:
        return spec.factory(**settings)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where}: bad settings for kind {kind!r}: {e}") from None


def _math(**kw):
    from rlvr.verifiers.math import MathVerifier

    return MathVerifier(**kw)


def _simple(cls_name: str):
    def make(**kw):
        from rlvr.verifiers import simple

        return getattr(simple, cls_name)(**kw)

    return make


def _boxed_format(**kw):
    from rlvr.verifiers.format import BoxedFormatVerifier

    return BoxedFormatVerifier(**kw)


# Kinds with an `answer_format` setting read the final answer in the task's format (boxed or <answer> tags):
# build_reward fills it in from the task unless the term sets it.
register_kind("math", _math, ("hedging", "require_boxed", "rel_tol", "timeout_s", "max_answer_chars", "answer_format"),
              doc="final math answer vs gold, on math-verify")
register_kind("boxed_format", _boxed_format, ("answer_format",), cheap=True,
              doc="exactly one final \\boxed{} answer (or <think> then one <answer> tag)")
register_kind("exact", _simple("ExactMatchVerifier"), ("require_boxed", "case_sensitive", "answer_format"), cheap=True,
              doc="normalised text equality")
register_kind("numeric", _simple("NumericVerifier"), ("require_boxed", "rel_tol", "abs_tol", "answer_format"),
              cheap=True, doc="one number within tolerance")
register_kind("multiple_choice", _simple("MultipleChoiceVerifier"), ("choices", "require_boxed", "answer_format"),
              cheap=True, doc="one option letter")
register_kind("regex", _simple("RegexVerifier"), ("pattern", "gold_is_pattern", "ignore_case"),
              doc="regex-extracted answer vs gold")


def _code(cls_name: str):
    def make(wall_s: float | None = None, memory_mb: int | None = None, **kw):
        from dataclasses import replace

        from rlvr.verifiers import code

        limits = code.DEFAULT_LIMITS
        if wall_s is not None:
            limits = replace(limits, wall_s=float(wall_s), cpu_s=max(1, int(wall_s)))
        if memory_mb is not None:
            limits = replace(limits, memory_mb=int(memory_mb))
        return getattr(code, cls_name)(limits, **kw)

    return make


register_kind("python_tests", _code("PythonTestsVerifier"), ("wall_s", "memory_mb"),
              doc="hidden tests run against the completion's code in a sandbox")
register_kind("stdio", _code("StdioVerifier"), ("wall_s", "memory_mb", "exact"),
              doc="program output on given stdin vs the expected output")
