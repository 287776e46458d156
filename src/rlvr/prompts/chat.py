"""A problem's chat messages -> the prompt's token ids, through the tokenizer's own chat template."""

from __future__ import annotations


def encode_prompt(tokenizer, messages: list[dict]) -> list[int]:
    """messages (the task's `messages(problem)`) -> prompt token ids, ending with the assistant turn's header.
    A tool call in the data is written as text where the template would drop it (rlvr.tasks.chat.for_template)."""
    from rlvr.tasks.chat import for_template

    text = tokenizer.apply_chat_template(for_template(tokenizer, messages), tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


class PromptCache:
    """encode_prompt once per problem id: a step re-draws problems it has tokenised before."""

    def __init__(self, tokenizer, task):
        self.tokenizer, self.task, self._ids = tokenizer, task, {}

    def __call__(self, problem) -> list[int]:
        if problem.id not in self._ids:
            self._ids[problem.id] = encode_prompt(self.tokenizer, self.task.messages(problem))
        return self._ids[problem.id]
