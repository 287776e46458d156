"""Tasks: data (generated or loaded) next to the verifier that grades it. `load_task(name, **settings)`.

A task has `name`, `bands`, `problems(split)` for split in SPLITS, and `messages(problem)` (the chat
that asks the question). Loaders import their data lazily.
"""

from rlvr.tasks.base import CODE_SYSTEM, SPLITS, DatasetError, Problem, ProblemSetTask, validate_problem


def _arithmetic(**kw):
    from rlvr.tasks.arithmetic import ArithmeticTask
    return ArithmeticTask(**kw)


def _jsonl(**kw):
    from rlvr.tasks.jsonl import JsonlTask
    return JsonlTask(**kw)


def _humaneval(path=None, system_prompt=CODE_SYSTEM):
    from rlvr.tasks.humaneval import load_humaneval
    return ProblemSetTask("humaneval", {"heldout": load_humaneval(path)}, system_prompt)  # evaluation only


def _code_procedural(seed=0, system_prompt=CODE_SYSTEM):
    from rlvr.tasks.code_procedural import load_code_procedural
    return ProblemSetTask("code_procedural", {s: load_code_procedural(s, seed=seed) for s in ("train", "heldout")},
                          system_prompt, bands=("easy", "medium", "hard"))


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


TASKS = {"arithmetic": _arithmetic, "reasoning_gym": _reasoning_gym, "hub": _hub, "jsonl": _jsonl, "humaneval": _humaneval, "code_procedural": _code_procedural,
         "math500": _benchmark("load_math500"), "champ": _benchmark("load_champ")}


def load_task(name: str, **settings):
    """Build a task by name; an unknown name lists the known ones."""
    if name not in TASKS:
        raise ValueError(f"task {name!r}: choose from {', '.join(sorted(TASKS))}")
    try:
        return TASKS[name](**settings)
    except TypeError as e:
        raise ValueError(f"task {name!r}: bad settings {sorted(settings)}: {e}") from None


__all__ = ["SPLITS", "DatasetError", "Problem", "ProblemSetTask", "validate_problem", "load_task", "TASKS"]
