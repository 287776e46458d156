"""An episode run's prompts as final/ records them: the task seen through its environment's opening.

final/prompt_template.json (rlvr.rundir.final) writes down the turns before each question from `task.messages`,
the single-turn prompt. An episode opens with what its environment's reset gives instead, and with the tools shown
(in the system message, or through the chat template's own `tools`): a model served without them would see other
prompts than it was trained on. `EpisodeOpenings` is the task with `messages` answered by the environment's opening
as the policy saw it, and the tools' schemas beside, so the record and the faithful chat template are the episode's.
"""

from __future__ import annotations

from rlvr.environments.episode import release, template_kwargs


class EpisodeOpenings:
    """`task`, except that messages(p) is the opening an episode starts p with, tools shown as run_episodes shows
    them: `new_environment`'s reset, or (without one: SFT on reference traces) the task's messages with `tools`.
    tools_shown(p) says which tools that opening showed and whether the chat template renders them itself (then a
    served conversation must pass them as `tools=`)."""

    def __init__(self, task, tokenizer, new_environment=None, tools: dict | None = None):
        self.task, self.tokenizer, self.new_environment, self.tools = task, tokenizer, new_environment, tools or {}
        self.answer_format = getattr(task, "answer_format", "boxed")

    def problems(self, split: str):
        return self.task.problems(split)

    def messages(self, problem) -> list[dict]:
        return self._opening(problem)[0]

    def tools_shown(self, problem) -> tuple[list[dict], bool]:
        """(the schemas of the tools p's opening showed, whether the chat template rendered them itself)."""
        _, tools, by_template = self._opening(problem)
        return [t.schema for t in tools.values()], by_template

    def _opening(self, problem) -> tuple[list[dict], dict, bool]:
        if self.new_environment is None:
            opening, tools = self.task.messages(problem), self.tools
        else:
            env = self.new_environment()
            try:
                opening, tools = env.reset(problem), getattr(env, "tools", {}) or {}
            finally:
                release([env])
        messages, extra = template_kwargs(self.tokenizer, list(opening), tools)
        return messages, tools, "tools" in extra


__all__ = ["EpisodeOpenings"]
