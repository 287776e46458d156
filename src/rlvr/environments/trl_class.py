"""A TRL `environment_factory` class as an rlvr environment (`episode.environment: trl`, `episode.source:
package.module:Class`), used the way TRL's GRPOTrainer uses it (trl 1.16, docs/environments.md):

- constructed with no arguments, one instance per episode;
- `reset(**row)` gets the problem's dataset row (rlvr.environments.foreign.problem_columns: prompt, question,
  answer, id, band and the task's own columns, from any rlvr task) and returns None or a string, which is appended
  to the last user message;
- every public method other than `reset` and `get_reward` is a tool, described by its type hints and its `Args:`
  docstring; a tool's result reaches the model as `str(result)`, as in TRL;
- the first turn without a tool call ends the episode; then `get_reward()` (where the class defines it) is the
  environment's own reward, a reward part named after the class, and each of `episode.reward_funcs` (TRL reward
  functions, `package.module:fn`) is called as TRL calls it, with a batch of one episode: `prompts`, `completions`
  (the episode's messages after the prompt), `completion_ids` (None: an environment does not see ids),
  `environments` (the instance) and the row's columns, each a one-element list.
"""

from __future__ import annotations

import inspect

from rlvr.environments.calls import TOOL_CALL_PARSERS, run_call
from rlvr.environments.foreign import EnvironmentFault, final_grade, problem_columns
from rlvr.environments.tool_env import ToolStep
from rlvr.environments.tools import Tool, tool_from_function
from rlvr.errors import ConfigError
from rlvr.registry import load_attr

NOT_TOOLS = ("reset", "get_reward")


def trl_tools(instance) -> dict[str, Tool]:
    """The public methods of a TRL environment as tools (listed on the class, as TRL does, so properties are not
    evaluated); a method rlvr cannot describe is refused naming Class.method and what is missing."""
    tools = {}
    for name, _ in inspect.getmembers(type(instance), predicate=inspect.isfunction):
        if name in NOT_TOOLS or name.startswith("_"):
            continue
        method = getattr(instance, name)
        described = tool_from_function(method)

        def as_text(_method=method, **arguments):
            return str(_method(**arguments))

        tools[name] = Tool(name, as_text, described.schema)
    return tools


def load_trl_class(ref: str):
    """The class `episode.source` names, checked: it constructs with no arguments and has reset()."""
    if not ref:
        raise ConfigError("episode.environment=trl needs episode.source: package.module:Class (a TRL environment)")
    cls = load_attr(ref, "episode.source")
    if not callable(cls):
        raise ConfigError(f"episode.source={ref!r} is not a class")
    if not callable(getattr(cls, "reset", None)):
        raise ConfigError(f"episode.source={ref!r}: {getattr(cls, '__name__', cls)} has no reset() (TRL calls it)")
    return cls


class TRLClassEnvironment:
    """One episode of a TRL environment class. `task_reward` grades the final answer where `grader` asks for
    rlvr's verifier; `reward_funcs` are TRL reward functions."""

    def __init__(self, cls, task, task_reward, reward_funcs=(), grader="environment", call_format="hermes"):
        self.name = getattr(cls, "__name__", str(cls))
        try:
            self.instance = cls()
        except Exception as e:
            raise ConfigError(f"{self.name}(): {type(e).__name__}: {e} (a TRL environment takes no arguments)") from e
        self.tools = trl_tools(self.instance)
        self.task, self.task_reward, self.reward_funcs, self.grader = task, task_reward, list(reward_funcs), grader
        self.has_reward = callable(getattr(self.instance, "get_reward", None))
        if grader != "task" and not (self.has_reward or self.reward_funcs):
            raise ConfigError(
                f"{self.name} has no get_reward() and episode.reward_funcs is empty: nothing grades its episodes "
                "(add one, or set episode.grader: task to grade the final answer with the task's verifier)"
            )
        self.parse = TOOL_CALL_PARSERS.get(call_format)
        self.problem, self.row, self.prompt, self.completion = None, {}, [], []

    def reset(self, problem) -> list[dict]:
        self.problem, messages = problem, list(self.task.messages(problem))
        self.row = problem_columns(problem, messages)
        observation = self.instance.reset(**self.row)
        if observation is not None and not isinstance(observation, str):
            raise EnvironmentFault(
                f"{self.name}.reset returned {type(observation).__name__}; a TRL environment returns a str or None"
            )
        if observation:  # a new list: the row's prompt stays the task's question, as TRL leaves its example
            messages = [*messages[:-1], {**messages[-1], "content": messages[-1]["content"] + observation}]
        self.prompt, self.completion = messages, []
        return messages

    def step(self, turn: str) -> ToolStep:
        self.completion.append({"role": "assistant", "content": turn})
        calls = self.parse(turn)
        if calls:
            results = [run_call(call, self.tools) for call in calls]
            answers = [{"role": "tool", "name": r.name or "", "content": r.text} for r in results]
            self.completion += answers
            return ToolStep(answers, tool_statuses=[r.status for r in results])
        parts, verdict = final_grade(self.grader, self.owner_rewards(), self.task_reward, turn, self.problem)
        return ToolStep(done=True, reward_parts=parts, verdict=verdict)

    def owner_rewards(self) -> dict:
        """{part name: value} from get_reward and the TRL reward functions (empty where rlvr's verifier grades)."""
        if self.grader == "task":
            return {}
        owner = {self.name: self.instance.get_reward()} if self.has_reward else {}
        columns = {k: [v] for k, v in self.row.items() if k != "prompt"}
        for fn in self.reward_funcs:
            name = getattr(fn, "__name__", type(fn).__name__)
            values = fn(
                prompts=[self.prompt],
                completions=[self.completion],
                completion_ids=[None],
                environments=[self.instance],
                **columns,
            )
            if len(values) != 1:
                raise EnvironmentFault(f"reward function {name} returned {len(values)} rewards for one completion")
            owner[name] = values[0]
        return owner


__all__ = ["TRLClassEnvironment", "load_trl_class", "trl_tools"]
