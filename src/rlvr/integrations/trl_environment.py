"""An rlvr tool environment inside TRL: a class TRL's GRPOTrainer takes as `environment_factory`, its dataset rows,
and its reward functions (rlvr's verifiers for the task's final answer).

    from rlvr.integrations.trl import environment_class, environment_dataset, reward_funcs
    Env = environment_class("tool_arithmetic", tools=["calculator"])
    funcs, weights = reward_funcs({"task": {"name": "tool_arithmetic"}})      # the task's own grader
    trainer = GRPOTrainer(model=..., environment_factory=Env, reward_funcs=funcs,
                          args=GRPOConfig(..., reward_weights=weights),
                          train_dataset=Dataset.from_list(environment_dataset("tool_arithmetic")))

The class has TRL's shape: constructed with no arguments, `reset(**row)` keeps the row (TRL's prompt is the row's
`prompt`, so it returns None), and one public method per rlvr tool with the tool's own signature and docstring, so
TRL describes it exactly as rlvr's environment does; a method runs the tool as rlvr's environment runs it (the
python tool in rlvr's sandbox). `tool_calls` counts the episode's calls by tool. The rows are the task's problems
as rlvr.environments.foreign.problem_columns lays them out (prompt, question, answer, id, band, ...), the same
columns an environment class gets under rlvr.
"""

from __future__ import annotations

import inspect
from collections import Counter

from rlvr.config import EpisodeConfig
from rlvr.environments.build import build_tools
from rlvr.environments.foreign import problem_columns
from rlvr.tasks import load_task


def _method(tool):
    """The tool's function as a method with its own name, signature, annotations and docstring."""

    def method(self, **arguments):
        self.tool_calls[tool.name] += 1
        return tool.fn(**arguments)

    signature = inspect.signature(tool.fn)
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    method.__signature__ = signature.replace(parameters=[self_param, *signature.parameters.values()])
    method.__annotations__ = dict(getattr(tool.fn, "__annotations__", {}))
    method.__doc__, method.__name__, method.__qualname__ = inspect.getdoc(tool.fn), tool.name, tool.name
    return method


def environment_class(task: str = "tool_arithmetic", tools=("calculator",), timeout_s: float = 5.0) -> type:
    """A TRL environment_factory class offering rlvr's `tools` (names or package.module:attr, as episode.tools)
    for episodes of `task`; `timeout_s` is the python tool's hard deadline per call."""
    built = build_tools(EpisodeConfig(tools=list(tools), tool_timeout_s=timeout_s))

    def __init__(self):
        self.row, self.tool_calls = {}, Counter()

    def reset(self, **row):
        self.row, self.tool_calls = row, Counter()
        return None

    namespace = {"__init__": __init__, "reset": reset, "__module__": __name__}
    namespace["__doc__"] = f"rlvr's {task} episodes with the tools {', '.join(built)}, as a TRL environment."
    namespace.update({name: _method(tool) for name, tool in built.items()})
    return type(f"Rlvr_{task}_environment", (), namespace)


def environment_dataset(task: str = "tool_arithmetic", split: str = "train", **settings) -> list[dict]:
    """The task's problems of `split` as dataset rows for TRL (Dataset.from_list(rows))."""
    task_obj = load_task(task, **settings)
    return [problem_columns(p, task_obj.messages(p)) for p in task_obj.problems(split)]


__all__ = ["environment_class", "environment_dataset"]
