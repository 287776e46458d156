"""The tool-use environment: the task's question, the tools offered; every turn that calls tools gets their outputs
back (role "tool"); the first turn that calls none is the final answer, graded by the task's reward (rlvr's
verifiers), and ends the episode. Malformed calls and tools that raise are answered with their error text and
counted (`tool_statuses`), never fatal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlvr.environments.calls import TOOL_CALL_PARSERS, run_call
from rlvr.environments.protocol import Step
from rlvr.environments.stepping import graded_together


@dataclass
class ToolStep(Step):
    tool_statuses: list[str] = field(default_factory=list)
    verdict: object = None  # the final answer's Verdict, on the step that ends the episode


class ToolEnvironment:
    """One episode of a task with tools. `reward(texts, problems)` is an rlvr Reward (or any callable returning an
    object with `.total` and `.verdicts`); `messages(problem)` the task's opening messages."""

    def __init__(self, messages, reward, tools: dict, call_format: str = "hermes"):
        self.messages_of, self.reward, self.tools = messages, reward, tools
        self.parse = TOOL_CALL_PARSERS.get(call_format)
        self.problem = None

    def reset(self, problem) -> list[dict]:
        self.problem = problem
        return list(self.messages_of(problem))

    def step(self, turn: str) -> ToolStep:
        calls = self.parse(turn)
        if not calls:  # no call: this is the answer
            result = self.reward([turn], [self.problem])
            return _answered(result.verdicts[0], float(result.total[0]))
        results = [run_call(call, self.tools) for call in calls]
        return ToolStep(
            [{"role": "tool", "content": r.text} for r in results], tool_statuses=[r.status for r in results]
        )

    @staticmethod
    def step_batch(envs: list[ToolEnvironment], turns: list[str]) -> list[ToolStep | None]:
        """The round's final answers graded by one reward call per reward, not one call (and one worker pool) an
        answer; a turn that calls tools is left None, so take_steps runs it alone on its threads as before. The same
        Steps as `step` one by one, and nothing changes before the grading returns."""
        answers = [i for i, (env, turn) in enumerate(zip(envs, turns)) if not env.parse(turn)]
        graded = graded_together(envs, turns, answers)
        return [_answered(*graded[i]) if i in graded else None for i in range(len(envs))]


def _answered(verdict, total: float) -> ToolStep:
    return ToolStep(done=True, reward_parts={"answer": total}, verdict=verdict)


__all__ = ["ToolEnvironment", "ToolStep"]
