"""Tasks: data (generated or loaded) next to the verifier that grades it. `load_task(name, **settings)`.

A task has `name`, `bands`, `problems(split)` for split in SPLITS, and `messages(problem)` (the chat
that asks the question). Loaders import their data lazily. `TASKS` is the registry: a new task is a new entry, or
`task.name: package.module:attr` naming a class or function that takes the task's settings as keyword arguments
and returns such an object (docs/extending.md).
"""

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlvr.registry import ConfigError, Registry
from rlvr.tasks.base import CODE_SYSTEM, SPLITS, DatasetError, Problem, ProblemSetTask, Task, validate_problem


def _arithmetic(**kw):
    from rlvr.tasks.arithmetic import ArithmeticTask

    return ArithmeticTask(**kw)


def _tool_arithmetic(**kw):
    from rlvr.tasks.tool_arithmetic import ToolArithmeticTask

    return ToolArithmeticTask(**kw)


def _jsonl(**kw):
    from rlvr.tasks.jsonl import JsonlTask

    return JsonlTask(**kw)


def _humaneval(path=None, system_prompt=CODE_SYSTEM):
    from rlvr.tasks.humaneval import load_humaneval

    return ProblemSetTask("humaneval", {"heldout": load_humaneval(path)}, system_prompt)  # evaluation only


def _code_procedural(seed=0, system_prompt=CODE_SYSTEM):
    from rlvr.tasks.code_procedural import load_code_procedural

    return ProblemSetTask(
        "code_procedural",
        {s: load_code_procedural(s, seed=seed) for s in ("train", "heldout")},
        system_prompt,
        bands=("easy", "medium", "hard"),
    )


def _benchmark(loader_name):
    def make(system_prompt=None, **kw):
        from rlvr.tasks import benchmarks
        from rlvr.tasks.arithmetic import DEFAULT_SYSTEM

        problems = getattr(benchmarks, loader_name)(**kw)
        return ProblemSetTask(loader_name.removeprefix("load_"), {"heldout": problems}, system_prompt or DEFAULT_SYSTEM)

    return make


def _hub(**kw):
    from rlvr.tasks.hub import load_hub_task

    return load_hub_task(**kw)


def _reasoning_gym(**kw):
    from rlvr.tasks.reasoning_gym import load_reasoning_gym

    return load_reasoning_gym(**kw)


def _verifiers(env: str = "", args: dict | None = None, limit: int = 0):
    from rlvr.tasks.verifiers_dataset import VerifiersTask

    if not env:
        raise ConfigError("task verifiers needs task.settings.env: an environment id or package.module:attr")
    return VerifiersTask(env, args, limit)


TASKS: Registry[Callable[..., Any]] = Registry("task", key="task.name")  # a class or factory of settings
for _name, _make, _doc in (
    ("arithmetic", _arithmetic, "the default: arithmetic word problems in difficulty bands, id-hash splits"),
    (
        "reasoning_gym",
        _reasoning_gym,
        "reasoning-gym's procedural families, graded by rlvr (extra rlvr[reasoning-gym])",
    ),
    ("tool_arithmetic", _tool_arithmetic, "products and two-step expressions past head arithmetic, for tool episodes"),
    ("hub", _hub, "a datasets hub id or a local dataset folder"),
    (
        "verifiers",
        _verifiers,
        "a verifiers environment's own dataset (extra rlvr[verifiers]; episode.environment: verifiers)",
    ),
    ("jsonl", _jsonl, "your own JSON-lines file (text or chat prompts; answer, gold, solution or tests)"),
    ("humaneval", _humaneval, "HumanEval's 164 problems with hidden tests, from its wheel (held-out only)"),
    ("code_procedural", _code_procedural, "one-line Python functions from examples, in bands"),
    ("math500", _benchmark("load_math500"), "MATH-500 (hub or local file), out-of-domain evaluation"),
    ("champ", _benchmark("load_champ"), "CHAMP competition problems from its wheel, out-of-domain evaluation"),
):
    TASKS.add(_name, _make, _doc)


def load_task(name: str, **settings):
    """Build a task by name (or `package.module:attr`); an unknown name lists the known ones."""
    factory = TASKS.get(name)
    _check_settings(name, factory, settings)
    try:
        return factory(**settings)
    except TypeError as e:
        raise ConfigError(f"task.settings for task {name!r}: {e}") from None


def absolute_paths(settings: dict) -> dict:
    """`settings` with its data paths (`path`, each of `splits`) made absolute where they name a local file or
    folder, so that the run's config.yaml finds its data from any working directory (a hub id stays as it is)."""

    def absolute(value):
        return str(Path(value).resolve()) if isinstance(value, str) and value and Path(value).exists() else value

    out = dict(settings)
    if "path" in out:
        out["path"] = absolute(out["path"])
    if isinstance(out.get("splits"), dict):
        out["splits"] = {split: absolute(v) for split, v in out["splits"].items()}
    return out


def _check_settings(name: str, factory, settings: dict) -> None:
    """An unknown setting names the task's valid ones (read from its factory's signature, or from the class a
    factory hands its settings to: `_jsonl` -> JsonlTask); a factory taking any keywords is left to itself."""
    known = _setting_names(factory)
    if known is None:
        return
    unknown = sorted(set(settings) - set(known))
    if unknown:
        raise ConfigError(
            f"task.settings.{unknown[0]}: not a setting of task {name!r}; "
            f"its settings: {', '.join(known) or '(none)'} (after changing task.name on a preset, give "
            f"the settings whole: --set 'task.settings={{...}}')"
        )


def _setting_names(factory) -> list[str] | None:
    import inspect

    try:
        params = inspect.signature(_SETTINGS_OF.get(factory, lambda: factory)()).parameters.values()
    except (TypeError, ValueError, ImportError):  # no signature, or an optional extra missing (its own error later)
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _jsonl_class():
    from rlvr.tasks.jsonl import JsonlTask

    return JsonlTask


def _arithmetic_class():
    from rlvr.tasks.arithmetic import ArithmeticTask

    return ArithmeticTask


# factories that pass **settings on, and the class whose signature names the settings they accept
def _hub_function():
    from rlvr.tasks.hub import load_hub_task

    return load_hub_task


def _reasoning_gym_class():
    from rlvr.tasks.reasoning_gym import ReasoningGymTask

    return ReasoningGymTask


_SETTINGS_OF = {
    _jsonl: _jsonl_class,
    _arithmetic: _arithmetic_class,
    _hub: _hub_function,
    _reasoning_gym: _reasoning_gym_class,
}


__all__ = [
    "SPLITS",
    "DatasetError",
    "Problem",
    "ProblemSetTask",
    "Task",
    "validate_problem",
    "load_task",
    "TASKS",
    "absolute_paths",
]
