"""Tasks: data (generated or loaded) next to the verifier that grades it. `load_task(name, **settings)`."""

from rlvr.tasks.base import SPLITS, DatasetError, Problem, validate_problem


def _arithmetic(**kw):
    from rlvr.tasks.arithmetic import ArithmeticTask
    return ArithmeticTask(**kw)


def _jsonl(**kw):
    from rlvr.tasks.jsonl import JsonlTask
    return JsonlTask(**kw)


TASKS = {"arithmetic": _arithmetic, "jsonl": _jsonl}


def load_task(name: str, **settings):
    """Build a task by name; an unknown name lists the known ones."""
    if name not in TASKS:
        raise ValueError(f"task {name!r}: choose from {', '.join(sorted(TASKS))}")
    return TASKS[name](**settings)


__all__ = ["SPLITS", "DatasetError", "Problem", "validate_problem", "load_task", "TASKS"]
