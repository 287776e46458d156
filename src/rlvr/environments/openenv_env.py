"""An OpenEnv environment run in process (`episode.environment: openenv`, `episode.source: package.module:Class`,
a subclass of openenv.core.env_server.interfaces.Environment, constructed with `episode.args`); openenv-core 0.3,
extra rlvr[openenv].

In process is the environment's own server-side class, without its HTTP or WebSocket server: rlvr calls
`reset(seed=, episode_id=)` (the arguments its signature takes; the seed from the problem's id, so an episode is
reproducible) and `step(action)`. The rlvr task supplies the episodes (their ids, splits and bands); the
environment supplies everything the policy sees: its observation is the prompt and, after each turn, the next user
message. The observation's own fields (all but done, reward, metadata) become text: one field as it is, several as
JSON. The policy's turn becomes the typed action (the class `step` is annotated with): the whole turn where the
action has a single text field, else a JSON object in the turn, validated by the action's pydantic model; a turn
that is not a valid action gets the validation error back as the next message (a parse_error, counted) and the
episode goes on. Each observation's `reward` adds to the reward part named after the class; `done` ends the
episode, `correct` where the rewards add up to at least 1.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import typing

from rlvr.environments.foreign import EnvironmentFault, final_grade
from rlvr.environments.tool_env import ToolStep
from rlvr.environments.tools import Tool
from rlvr.errors import ConfigError
from rlvr.registry import load_attr

BASE_FIELDS = ("done", "reward", "metadata")
_JSON_OBJECT = re.compile(r"\{.*\}", re.S)


def load_openenv_class(ref: str):
    """The Environment subclass `episode.source` names and its action model; ConfigError in one line otherwise."""
    try:
        from openenv.core.env_server.interfaces import Environment
        from openenv.core.env_server.types import Action
    except ImportError as e:
        raise ConfigError(f"an OpenEnv environment needs openenv-core: pip install 'rlvr[openenv]' ({e})") from None
    if not ref:
        raise ConfigError("episode.environment=openenv needs episode.source: package.module:Class")
    cls = load_attr(ref, "episode.source")
    if not (inspect.isclass(cls) and issubclass(cls, Environment)):
        raise ConfigError(f"episode.source={ref!r} is not an openenv Environment subclass")
    # openenv-core ships no type information: to mypy its Environment is Any, and `cls` an object's type
    action = typing.get_type_hints(cls.step).get("action")  # type: ignore[attr-defined]
    if not (inspect.isclass(action) and issubclass(action, Action)):
        raise ConfigError(f"episode.source={ref!r}: annotate {cls.__name__}.step(action: YourAction) with its Action")
    return cls, action


def observation_text(obs) -> str:
    """An observation's own fields as the text the policy reads."""
    fields = {k: v for k, v in obs.model_dump().items() if k not in BASE_FIELDS}
    if len(fields) == 1:
        return str(next(iter(fields.values())))
    return json.dumps(fields, default=str)


def seed_of(problem_id: str) -> int:
    return int(hashlib.sha256(problem_id.encode()).hexdigest()[:8], 16)


class OpenEnvEnvironment:
    """One episode of an OpenEnv environment class, in process."""

    def __init__(self, cls, action, args: dict, task_reward, grader="environment"):
        self.name, self.action, self.task_reward, self.grader = cls.__name__, action, task_reward, grader
        try:
            self.env = cls(**args)
        except Exception as e:
            raise ConfigError(f"{self.name}(**episode.args): {type(e).__name__}: {e}") from e
        fields = {k: f for k, f in action.model_fields.items() if k != "metadata"}
        text = [k for k, f in fields.items() if f.annotation is str]
        self.text_field = text[0] if len(fields) == 1 and text else None
        accepts = inspect.signature(self.env.reset).parameters
        self.reset_keys = {k for k in ("seed", "episode_id") if k in accepts or "kwargs" in accepts}
        self.tools: dict[str, Tool] = {}
        self.problem, self.total = None, 0.0

    def reset(self, problem) -> list[dict]:
        self.problem, self.total = problem, 0.0
        given = {"seed": seed_of(problem.id), "episode_id": problem.id}
        obs = self.env.reset(**{k: v for k, v in given.items() if k in self.reset_keys})
        if not hasattr(obs, "model_dump"):
            raise EnvironmentFault(f"{self.name}.reset returned {type(obs).__name__}, not an Observation")
        return [{"role": "user", "content": observation_text(obs)}]

    def step(self, turn: str) -> ToolStep:
        try:
            action = self.to_action(turn)
        except ValueError as e:  # the policy's mistake: told, counted, and the episode goes on
            text = f"Error: that is not a valid {self.action.__name__}: {str(e)[:300]}"
            return ToolStep([{"role": "user", "content": text}], tool_statuses=["parse_error"])
        obs = self.env.step(action)
        reward = float(obs.reward or 0.0)
        self.total += reward
        if not obs.done:
            parts = {} if self.grader == "task" else {self.name: reward}
            return ToolStep([{"role": "user", "content": observation_text(obs)}], reward_parts=parts)
        parts, verdict = final_grade(self.grader, {self.name: self.total}, self.task_reward, turn, self.problem)
        if self.name in parts:  # the part adds up per turn: this turn's share, so the episode's sum is the total
            parts[self.name] = reward
        return ToolStep(done=True, reward_parts=parts, verdict=verdict)

    def to_action(self, turn: str):
        """The turn as the environment's typed action (pydantic's ValidationError is a ValueError)."""
        if self.text_field:
            return self.action(**{self.text_field: turn})
        match = _JSON_OBJECT.search(turn)
        if not match:
            raise ValueError(f"write the action as a JSON object with {', '.join(self.action.model_fields)}")
        return self.action.model_validate_json(match.group(0))

    def close(self) -> None:
        if callable(getattr(self.env, "close", None)):
            self.env.close()


__all__ = ["OpenEnvEnvironment", "load_openenv_class", "observation_text"]
