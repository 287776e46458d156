"""rlvr's environment protocol, small on purpose:

    env.reset(problem) -> list of messages that open the episode (system / user turns; tools' schemas separately)
    env.step(turn: str) -> Step(messages, done, reward_parts)

`turn` is the policy's whole turn as text; `messages` what the environment answers (tool outputs as role "tool",
feedback as role "user"), appended after the turn; `done` ends the episode; `reward_parts` ({name: value}) are
per-turn rewards the episode's return adds up. A single-turn task is the environment whose first step is done.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass
class Step:
    messages: list[dict] = field(default_factory=list)
    done: bool = False
    reward_parts: dict[str, float] = field(default_factory=dict)


class Environment(Protocol):
    tools: dict  # name -> rlvr.environments.tools.Tool the policy may call (may be empty)

    def reset(self, problem) -> list[dict]: ...

    def step(self, turn: str) -> Step: ...


__all__ = ["Environment", "Step"]
