"""The environment and tool registries, and the one builder of a run's environment from its `episode` section.

An ENVIRONMENTS entry is an `EnvironmentKind`: its factory `(task, reward, episode) -> environment`, called once per
episode (so an environment may keep the episode's state), or none for `none`, the single-turn rollout, and whether it
offers episode.tools; callers ask `episodic(episode)` and `takes_tools(name)` rather than test the name. `episode.environment: package.module:attr` names your own class or
function of the factory's shape (docs/environments.md), an episodic kind as the built-ins are. A TOOLS entry is a
factory `(episode) -> Tool`; `episode.tools` may name a typed function with an `Args:` docstring as
`package.module:attr`, which becomes a tool as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rlvr.environments.builtin import calculator, python_tool
from rlvr.environments.calls import TOOL_CALL_PARSERS
from rlvr.environments.episode import release
from rlvr.environments.protocol import Environment
from rlvr.environments.retry import RetryEnvironment
from rlvr.environments.tool_env import ToolEnvironment
from rlvr.environments.tools import Tool, tool_from_function
from rlvr.environments.trl_class import TRLClassEnvironment, load_trl_class
from rlvr.errors import ConfigError
from rlvr.registry import Registry, load_attr


def _tool_plugin(obj, ref: str):
    """A user's typed function, as a tool factory (the function's own schema; refused by name if it has none)."""
    if isinstance(obj, Tool):
        return lambda episode: obj
    if not callable(obj):
        raise ConfigError(f"episode.tools: {ref!r} is not a function")
    tool = tool_from_function(obj)
    return lambda episode: tool


TOOLS: Registry[Callable] = Registry("tool", key="episode.tools", plugin=_tool_plugin)
TOOLS.add(
    "calculator", lambda episode: tool_from_function(calculator), "exact arithmetic on an expression, no code run"
)
TOOLS.add(
    "python",
    lambda episode: python_tool(wall_s=episode.tool_timeout_s),
    "a Python program in rlvr's sandbox (own uid, rlimits, no network, hard deadline), its output back",
)


@dataclass(frozen=True)
class EnvironmentKind:
    """An ENVIRONMENTS entry. make: `(task, reward, episode) -> environment`, one per episode; None for `none`.
    takes_tools: it offers the policy episode.tools (the tool environment), so tools elsewhere are a mistake (the
    config check) and a change of them is no change of the run (a resume)."""

    make: Callable[..., Environment] | None
    takes_tools: bool = False

    @property
    def episodic(self) -> bool:
        """Whether a rollout is an episode of an environment's turns, rather than one answer per prompt."""
        return self.make is not None


def _environment_plugin(obj, ref: str) -> EnvironmentKind:
    """A user's environment class or function (`package.module:attr`): an episodic kind, as the built-ins are, which
    takes episode.tools (it gets the episode section: its own code decides what they mean to it)."""
    return obj if isinstance(obj, EnvironmentKind) else EnvironmentKind(obj, takes_tools=True)


ENVIRONMENTS: Registry[EnvironmentKind] = Registry("environment", key="episode.environment", plugin=_environment_plugin)
ENVIRONMENTS.add("none", EnvironmentKind(None), "one answer per prompt: single-turn rollouts, no environment")


def _environment(
    name: str, takes_tools: bool = False
) -> Callable[[Callable[..., Environment]], Callable[..., Environment]]:
    """Register a factory as an episodic environment, its docstring the description."""

    def wrap(make: Callable[..., Environment]) -> Callable[..., Environment]:
        ENVIRONMENTS.add(name, EnvironmentKind(make, takes_tools), make.__doc__ or "")
        return make

    return wrap


@_environment("tool", takes_tools=True)
def _tool(task, reward, episode):
    """the task's question with episode.tools offered; tool outputs back each turn; the first turn without a call is
    the answer, graded by the task's reward"""
    tools = build_tools(episode)
    return ToolEnvironment(task.messages, reward, tools, call_format=episode.call_format)


@_environment("retry")
def _retry(task, reward, episode):
    """any task as up to episode.attempts answers, a wrong one told so; reward discounted per attempt"""
    return RetryEnvironment(task, reward, attempts=episode.attempts, discount=episode.discount)


@_environment("trl")
def _trl(task, reward, episode):
    """a TRL environment_factory class (episode.source) on the task's problems: its public methods are the tools,
    get_reward() and episode.reward_funcs its reward"""
    funcs = [load_attr(ref, "episode.reward_funcs") for ref in episode.reward_funcs]
    for ref, fn in zip(episode.reward_funcs, funcs):
        if not callable(fn):
            raise ConfigError(f"episode.reward_funcs: {ref!r} is not a function")
    cls = load_trl_class(episode.source)
    return TRLClassEnvironment(cls, task, reward, funcs, episode.grader, episode.call_format)


@_environment("verifiers")
def _verifiers(task, reward, episode):
    """a verifiers environment (0.2: SingleTurnEnv, MultiTurnEnv, ToolEnv) on its own dataset (task.name: verifiers):
    its rollout, tools and stop conditions, its rubric as the reward (extra rlvr[verifiers])"""
    from rlvr.environments.verifiers_env import VerifiersEnvironment

    return VerifiersEnvironment(task, reward, episode.grader, episode.call_format)


@_environment("openenv")
def _openenv(task, reward, episode):
    """an OpenEnv environment class (episode.source, constructed with episode.args) run in process: its observation
    is the prompt, the policy's turn its typed action, its observations' rewards the reward (extra rlvr[openenv])"""
    from rlvr.environments.openenv_env import OpenEnvEnvironment, load_openenv_class

    cls, action = load_openenv_class(episode.source)
    return OpenEnvEnvironment(cls, action, episode.args, reward, episode.grader)


def build_tools(episode) -> dict[str, Tool]:
    """name -> Tool for episode.tools (a tool that cannot be described is refused here, naming it)."""
    tools = [TOOLS.get(name)(episode) for name in episode.tools]
    return {t.name: t for t in tools}


def episodic(episode) -> bool:
    """Whether `episode.environment` makes episodes (any environment but `none`, a plug-in's too)."""
    return ENVIRONMENTS.get(episode.environment).episodic


def episodes_of(episode) -> str | None:
    """The environment's name when rollouts are episodes (episodic), else None: what a prompt format that cannot run
    episodes names in its refusal (rlvr.prompts.chat.prompt_format)."""
    return episode.environment if episodic(episode) else None


def takes_tools(environment: str) -> bool:
    """Whether the environment named `environment` offers episode.tools (its entry's takes_tools; a plug-in's is
    imported to ask it)."""
    return ENVIRONMENTS.get(environment).takes_tools


def environment_factory(episode, task, reward) -> Callable[[], Environment] | None:
    """A function that makes one fresh environment per episode, or None for single-turn rollouts. Checks the
    environment, tools and call format now (before any model loads) by building one environment."""
    make = ENVIRONMENTS.get(episode.environment).make
    if make is None:
        return None
    TOOL_CALL_PARSERS.get(episode.call_format)
    build_tools(episode)

    def new_environment():
        return make(task, reward, episode)

    probe_environment(new_environment(), episode.environment, task)
    return new_environment


def probe_environment(env, name: str, task) -> None:
    """One environment, checked before any model loads: it has reset and step, and reset opens an episode of the
    task's first problem with a list of messages; what is wrong is one line naming the class (exit 2)."""
    who = getattr(env, "name", None) or type(env).__name__
    for method in ("reset", "step"):
        if not callable(getattr(env, method, None)):
            raise ConfigError(
                f"episode.environment={name!r}: {who} has no {method}() "
                "(an environment has reset(problem) -> messages and step(turn) -> Step)"
            )
    problems = task.problems("train") or task.problems("heldout")
    if not problems:
        return
    try:
        opening = env.reset(problems[0])
    except ConfigError:
        raise
    except Exception as e:
        raise ConfigError(f"episode.environment={name!r}: {who}.reset raised {type(e).__name__}: {e}") from None
    finally:
        release([env])  # the probe's episode ends here, whatever reset did
    if not isinstance(opening, list) or not all(isinstance(m, dict) and "role" in m for m in opening):
        raise ConfigError(f"episode.environment={name!r}: {who}.reset must return a list of chat messages")


__all__ = [
    "ENVIRONMENTS",
    "TOOLS",
    "EnvironmentKind",
    "build_tools",
    "environment_factory",
    "episodic",
    "episodes_of",
    "probe_environment",
    "takes_tools",
]
