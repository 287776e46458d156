"""Verifier kinds by name (`KINDS`, a registry): the one table that reward terms, `rlvr verify` and `rlvr audit`
look up.

A kind is data: how to build it, which settings it takes, its maximum reward (for composition's dominance rule),
whether it is cheap enough to score in-process, and which gold it reads. Every kind is registered below with
`register_kind`; factories import their module lazily, so reading the registry does not load sympy. A grader
written outside rlvr is `kind: package.module:attr`: a class (or function) whose keyword arguments are its settings
and whose instances have `.score(completion, problem) -> Verdict`; class attributes `max_reward`, `cheap` and
`grades` override the defaults (1.0, False, "answer") (docs/extending.md), and a method `audit_suite(self)`, returning
an rlvr.verifiers.audit_cases.AuditSuite, gives `rlvr audit` its cases.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlvr.registry import ConfigError, Registry
from rlvr.verifiers.audit_cases import AuditSuite, math_suite
from rlvr.verifiers.base import Verdict


@dataclass(frozen=True)
class Kind:
    """factory(**settings) -> a verifier (has .name and .score(completion, problem) -> Verdict)."""

    factory: Callable[..., object]
    settings: tuple[str, ...]
    max_reward: float = 1.0
    cheap: bool = False  # pure string work: scored in-process, no worker pool needed
    doc: str = ""
    grades: str | None = "answer"  # the gold it reads: "answer", "tests", or None (shaping: reads no gold)
    # verifier -> the AuditSuite `rlvr audit` attacks it with (rlvr.verifiers.audit_cases); None: the kind has none
    audit: Callable[[Any], AuditSuite] | None = None


def plugin_kind(obj, ref: str) -> Kind:
    """A user's grader class or function (`package.module:attr`) as a Kind: its keyword parameters are its settings."""
    if not callable(obj):
        raise ConfigError(f"kind={ref!r} is a {type(obj).__name__}, not a class or function that builds a grader")
    params = inspect.signature(obj).parameters.values()
    settings = tuple(p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
    doc = (obj.__doc__ or "").strip().splitlines()[0] if (obj.__doc__ or "").strip() else ""
    return Kind(
        obj,
        settings,
        float(getattr(obj, "max_reward", 1.0)),
        bool(getattr(obj, "cheap", False)),
        doc,
        getattr(obj, "grades", "answer"),
        getattr(obj, "audit_suite", None),  # a method of the grader's class, or a function of the grader
    )


KINDS: Registry[Kind] = Registry("verifier kind", key="kind", plugin=plugin_kind)


def runs_tests(kind: object) -> bool:
    """Whether `kind` is a registered kind that grades by running tests (its entry's grades: python_tests, stdio), so
    its completions are code and its commands the sandbox's (rlvr.verifiers.code_commands). A plug-in reference is
    not imported here (an old run's config read for its report may name one that is gone): False, as for any other
    name."""
    return isinstance(kind, str) and kind in KINDS and KINDS.get(kind).grades == "tests"


def register_kind(
    name: str,
    factory: Callable[..., object],
    settings: tuple[str, ...] = (),
    max_reward: float = 1.0,
    cheap: bool = False,
    doc: str = "",
    grades: str | None = "answer",
    audit: Callable[[Any], AuditSuite] | None = None,
) -> None:
    """Add (or replace) a verifier kind; `settings` are the keyword arguments a config may pass; `grades` is
    the gold a problem must carry for it ("answer", "tests", or None for a shaping term); `audit` gives a built
    verifier its audit suite (rlvr audit)."""
    KINDS.add(name, Kind(factory, tuple(settings), float(max_reward), bool(cheap), doc, grades, audit), doc)


def build_verifier(kind: str, settings: dict | None = None, where: str = "verifier"):
    """Construct a verifier of `kind` (a name or `package.module:attr`); a wrong kind or setting is a ConfigError
    naming key and choices."""
    spec, settings = KINDS.get(kind, f"{where}.kind"), dict(settings or {})
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
# build_reward fills it in from the task unless the term sets it. `answer_form` (math only) is what the answer must
# look like (rlvr.tasks.forms); resolve_reward fills it in from the task.
register_kind(
    "math",
    _math,
    ("hedging", "require_boxed", "rel_tol", "timeout_s", "max_answer_chars", "answer_form", "answer_format"),
    doc="final math answer vs gold, on math-verify, in the task's answer form",
    audit=math_suite,
)
register_kind(
    "boxed_format",
    _boxed_format,
    ("answer_format",),
    cheap=True,
    doc="exactly one final \\boxed{} answer (or <think> then one <answer> tag)",
    grades=None,
)
register_kind(
    "exact",
    _simple("ExactMatchVerifier"),
    ("require_boxed", "case_sensitive", "answer_format"),
    cheap=True,
    doc="normalised text equality",
)
register_kind(
    "numeric",
    _simple("NumericVerifier"),
    ("require_boxed", "rel_tol", "abs_tol", "answer_format"),
    cheap=True,
    doc="one number within tolerance",
)
register_kind(
    "multiple_choice",
    _simple("MultipleChoiceVerifier"),
    ("choices", "require_boxed", "answer_format"),
    cheap=True,
    doc="one option letter",
)
register_kind(
    "regex",
    _simple("RegexVerifier"),
    ("pattern", "gold_is_pattern", "ignore_case"),
    doc="regex-extracted answer vs gold",
)


def _structured(cls_name: str):
    def make(**kw):
        from rlvr.verifiers import structured

        return getattr(structured, cls_name)(**kw)

    return make


register_kind(
    "ordered_list",
    _structured("OrderedListVerifier"),
    (),
    cheap=True,
    doc="a boxed list of numbers in order; list notations compare by value",
)
register_kind(
    "countdown",
    _structured("CountdownVerifier"),
    (),
    cheap=True,
    doc="a boxed expression of the given numbers (each at most as often as given) equal to the target",
)
register_kind(
    "text",
    _structured("TextVerifier"),
    (),
    cheap=True,
    doc="the boxed answer as text, case and spacing folded; hedges refused",
)


def _trl_reward(**kw):
    from rlvr.verifiers.trl_function import TRLRewardVerifier

    return TRLRewardVerifier(**kw)


register_kind(
    "trl_reward",
    _trl_reward,
    ("func",),
    doc="a TRL reward function (func: package.module:attr) as a grader: correct from 1 up; audited by the math suite",
    audit=math_suite,
)


class RoutedVerifier:
    """Each problem graded by the kind its own data names (`problem.meta["grader"]` = {"kind": ..., settings}), each
    kind built once per process: a task that mixes families (reasoning-gym's) carries its grader per problem."""

    name = "routed"

    def __init__(self):
        self._built: dict[str, object] = {}

    def _verifier(self, spec: dict):
        key = repr(sorted(spec.items()))
        if key not in self._built:
            self._built[key] = build_verifier(
                spec["kind"], {k: v for k, v in spec.items() if k != "kind"}, "problem.meta.grader"
            )
        return self._built[key]

    def warm_up(self) -> None:
        from rlvr.verifiers.math import MathVerifier

        MathVerifier().warm_up()

    def score(self, completion, problem) -> Verdict:
        spec = (getattr(problem, "meta", None) or {}).get("grader")
        if not isinstance(spec, dict) or "kind" not in spec:
            return Verdict("invalid_gold", 0.0, None, "the problem names no grader (meta.grader)")
        return self._verifier(spec).score(completion, problem)


register_kind(
    "routed", RoutedVerifier, (), doc="each problem graded by the kind its data names (meta.grader); mixed-family tasks"
)


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


register_kind(
    "python_tests",
    _code("PythonTestsVerifier"),
    ("wall_s", "memory_mb"),
    doc="hidden tests run against the completion's code in a sandbox",
    grades="tests",
)
register_kind(
    "stdio",
    _code("StdioVerifier"),
    ("wall_s", "memory_mb", "exact"),
    doc="program output on given stdin vs the expected output",
    grades="tests",
)


def _remote(**kw):
    from rlvr.verifiers.remote import RemoteVerifier

    return RemoteVerifier(**kw)


# grades=None: the service checks the gold its own grader reads; cheap: the client does no scoring work itself
register_kind(
    "remote",
    _remote,
    ("urls", "token_env", "task", "verifier", "timeout_s", "retries", "backoff_s", "batch_items"),
    cheap=True,
    grades=None,
    doc="scored by `rlvr serve` services over HTTP: round robin, failover, bounded retries",
)
