"""A `verifiers` environment (0.2 API: vf.SingleTurnEnv, vf.MultiTurnEnv, vf.ToolEnv, ...) as an rlvr environment
(`episode.environment: verifiers`, on `task.name: verifiers`, whose problems are the environment's own dataset).

The environment runs its own rollout: `env.rollout(row, client, ...)` sets up its state, builds each prompt
(`env_response`: tool results, feedback), checks its stop conditions and cleans up; then its rubric scores the
rollout (`rubric.score_rollout`), the weighted sum being the reward part "rubric" (its `pass_threshold` decides
`correct`). rlvr plays the model: `TurnClient` is a vf.Client whose every request waits for the policy's next
turn, so the rollout is a coroutine that rlvr advances one turn per `step` on an event loop of the episode's own.
The client hands the environment the turn's text with the Hermes tool calls parsed from it (`episode.call_format`);
the ids trained on are still exactly the sampled ones (rlvr.environments.episode splices the environment's
messages). Not supported: group-level reward functions (a rubric that scores G rollouts together; rlvr scores
each episode as it ends) and environments that need a remote server or sandbox.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from rlvr.environments.calls import TOOL_CALL_PARSERS
from rlvr.environments.foreign import EnvironmentFault, final_grade, owner_verdict
from rlvr.environments.tool_env import ToolStep
from rlvr.environments.tools import Tool
from rlvr.errors import ConfigError
from rlvr.tasks.verifiers_dataset import content_text


def _dicts(messages) -> list[dict]:
    """verifiers' pydantic messages as plain chat messages (role, text content)."""
    return [{"role": m.role, "content": content_text(getattr(m, "content", None))} for m in messages]


def _tools(tool_defs) -> dict[str, Tool]:
    """The environment's vf.Tool definitions as schemas the chat template shows (the environment runs them)."""
    tools = {}
    for t in tool_defs or []:
        schema = {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        tools[t.name] = Tool(t.name, _run_by_the_environment, schema)
    return tools


def _run_by_the_environment(**arguments: Any) -> Any:
    """A verifiers environment's tool: the environment calls it in its own rollout, never rlvr."""
    raise RuntimeError("a verifiers environment runs its own tools")


def turn_client(vf, parse):
    """A vf.Client subclass whose requests wait for the policy's turn (built here: verifiers is imported lazily)."""

    class TurnClient(vf.Client):
        def __init__(self):
            super().__init__(None)
            self.request, self.reply, self.asked = None, None, None

        def setup_client(self, config):
            return None

        async def to_native_tool(self, tool):
            return tool

        async def to_native_prompt(self, messages):
            return messages, {}

        async def get_native_response(self, prompt, model, sampling_args, tools=None, **kwargs):
            self.reply = asyncio.get_running_loop().create_future()
            self.request = (prompt, tools)
            self.asked.set()
            return await self.reply

        async def raise_from_native_response(self, response):
            return None

        async def from_native_response(self, text):
            calls = [c for c in parse(text) if c.name is not None and c.error is None]
            tool_calls = [
                vf.types.ToolCall(id=f"call_{uuid.uuid4().hex[:8]}", name=c.name, arguments=json.dumps(c.arguments))
                for c in calls
            ]
            message = vf.types.ResponseMessage(
                content=text,
                tool_calls=tool_calls or None,
                finish_reason="tool_calls" if tool_calls else "stop",
                is_truncated=False,
            )
            return vf.types.Response(id=uuid.uuid4().hex, created=int(time.time()), model="rlvr", message=message)

        async def close(self):
            return None

    return TurnClient()


class VerifiersEnvironment:
    """One episode of a verifiers environment; `task` is a rlvr.tasks.verifiers_dataset.VerifiersTask."""

    def __init__(self, task, task_reward, grader="environment", call_format="hermes"):
        from rlvr.tasks.verifiers_dataset import import_verifiers

        self.vf = import_verifiers()
        if not hasattr(task, "vf_env"):
            raise ConfigError(
                "episode.environment=verifiers runs a verifiers environment on its own dataset: set task.name: "
                "verifiers and task.settings.env (an environment id or package.module:attr)"
            )
        self.env, self.task_reward, self.grader = task.vf_env, task_reward, grader
        self.name = type(self.env).__name__
        if getattr(self.env.rubric, "_get_group_reward_funcs", lambda: [])():
            raise ConfigError(f"{self.name}: its rubric has group-level reward functions, which rlvr cannot run")
        self.parse = TOOL_CALL_PARSERS.get(call_format)
        self.tools, self.loop, self.rollout, self.prompt, self.problem = {}, None, None, [], None

    def reset(self, problem) -> list[dict]:
        self.close()
        self.problem, self.loop = problem, asyncio.new_event_loop()  # the episode's own: it advances one turn a step
        self.client = turn_client(self.vf, self.parse)
        row = dict(problem.meta["row"])
        self.rollout = self.loop.create_task(self.env.rollout(row, self.client, "rlvr", {}))
        if not self._advance():
            raise EnvironmentFault(f"{self.name} ended its rollout before asking for a turn: {self._error()}")
        prompt, tool_defs = self.client.request
        self.tools, self.prompt = _tools(tool_defs), _dicts(prompt)
        return list(self.prompt)

    def step(self, turn: str) -> ToolStep:
        self.client.reply.set_result(turn)
        statuses = ["parse_error" if c.name is None or c.error else "ok" for c in self.parse(turn)]
        if self._advance():  # the environment answered and asks for the next turn
            prompt = _dicts(self.client.request[0])
            new = prompt[len(self.prompt) + 1 :]  # after the prompt so far and this turn
            self.prompt = prompt
            return ToolStep(new, tool_statuses=statuses)
        state = self.rollout.result()
        if state.get("error") is not None:
            raise EnvironmentFault(f"{self.name}: {self._error()}")
        self.loop.run_until_complete(self.env.rubric.score_rollout(state))
        self.loop.run_until_complete(self.env.rubric.cleanup(state))
        owner = {"rubric": state["reward"]}
        parts, verdict = final_grade(self.grader, owner, self.task_reward, turn, self.problem)
        if self.grader == "environment":  # verifiers' own threshold for a solved rollout
            verdict = owner_verdict(state["reward"], "rubric", solved_at=self.env.pass_threshold)[1]
        self.close()
        return ToolStep(done=True, reward_parts=parts, verdict=verdict, tool_statuses=statuses)

    def _advance(self) -> bool:
        """Run the rollout until it asks for a turn (True) or ends (False)."""
        self.client.request = None
        self.client.asked = asyncio.Event()
        waiting = self.loop.create_task(self.client.asked.wait())
        self.loop.run_until_complete(asyncio.wait([self.rollout, waiting], return_when=asyncio.FIRST_COMPLETED))
        waiting.cancel()
        self.loop.run_until_complete(asyncio.gather(waiting, return_exceptions=True))
        return self.client.request is not None and not self.rollout.done()

    def _error(self) -> str:
        if not self.rollout.done():
            return "still running"
        if self.rollout.exception() is not None:
            e = self.rollout.exception()
            return f"{type(e).__name__}: {e}"
        error = self.rollout.result().get("error")
        return f"{type(error).__name__}: {error}" if error is not None else "no error"

    def close(self) -> None:
        if self.loop is not None and not self.loop.is_closed():
            if self.rollout is not None and not self.rollout.done():
                self.rollout.cancel()
                self.loop.run_until_complete(asyncio.gather(self.rollout, return_exceptions=True))
            self.loop.close()


__all__ = ["VerifiersEnvironment", "turn_client"]
