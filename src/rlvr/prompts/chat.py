"""A problem's messages -> the prompt's token ids, in the model's prompt format (`model.prompt_format`).

- "chat": through the tokenizer's own chat template (an instruct model's);
- "plain": as plain text, for a base model, which has no chat template ("zero" RL: DeepSeek-R1-Zero, DAPO,
  Open-Reasoner-Zero train base checkpoints so). The R1-Zero frame, the task's instruction (its system turn: the
  answer format's instruction, or the task's own system prompt), then each turn as a `User:` / `Assistant:` line
  (the demonstration's solved exchange, then the question), ending `Assistant:` for the model to go on (plain_text).
  It is tokenized by the tokenizer's own rule for special tokens: a Llama tokenizer puts its BOS first, Qwen's and
  SmolLM2's put nothing. A completion ends at the end-of-text token or where the model starts a next `User:` line
  (plain_stop_ids; rlvr.sampling.build_sampler adds it to the stop ids);
- "auto" (the default): chat when the tokenizer has a chat template, else plain.

A chat format asked of a tokenizer without a template, and episodes (their turns are chat messages) in the plain
format, are refused in one line (prompt_format). docs/your-data.md, "Base models", quotes the text.
"""

from __future__ import annotations

from rlvr.errors import ConfigError

PLAIN_FRAME = "A conversation between User and Assistant. The User asks a question, and the Assistant solves it."
PLAIN_ROLES = {"user": "User", "assistant": "Assistant", "tool": "Tool"}
GUIDE = 'docs/your-data.md, "Base models"'


def has_chat_template(tokenizer) -> bool:
    """Whether the tokenizer carries a chat template (a base model's usually has none)."""
    return bool(getattr(tokenizer, "chat_template", None))


def prompt_format(setting: str, tokenizer, model: str = "the model", episodes: str | None = None) -> str:
    """The prompt format, chat or plain, that model.prompt_format `setting` gives this tokenizer (auto: chat when it
    has a chat template). A ConfigError (one line) for chat asked of a tokenizer without a template, and for episodes
    (`episodes`: the environment's name, rlvr.environments.build.episodes_of) in the plain format."""
    has = has_chat_template(tokenizer)
    if setting == "chat" and not has:
        raise ConfigError(
            f"model.prompt_format: chat, but the tokenizer of {model} has no chat template (a base model); choose "
            f"plain, which prompts it as plain text, or auto ({GUIDE})"
        )
    fmt = "chat" if setting == "chat" or (setting == "auto" and has) else "plain"
    if fmt == "plain" and episodes:
        why = "plain" if setting == "plain" else "auto, and its tokenizer has no chat template"
        raise ConfigError(
            f"episode.environment: {episodes} needs a chat template (an episode's turns are chat messages), but "
            f"{model} is prompted as plain text (model.prompt_format: {why}); episodes need a model with a chat "
            f"template ({GUIDE})"
        )
    return fmt


def plain_text(messages: list[dict]) -> str:
    """The plain prompt of `messages`: the frame and the system turns' text on the first line, then one line per turn
    ("User: ...", "Assistant: ...", a tool's "Tool: ..."; tool calls written as text), then "Assistant:"."""
    from rlvr.tasks.chat import calls_as_text

    head = " ".join([PLAIN_FRAME] + [m["content"].strip() for m in messages if m["role"] == "system" and m["content"]])
    turns = calls_as_text([m for m in messages if m["role"] != "system"])
    return "\n".join([head, *(f"{PLAIN_ROLES.get(m['role'], m['role'])}: {m['content']}" for m in turns), "Assistant:"])


def plain_stop_ids(tokenizer) -> list[int]:
    """The token that starts a next `User:` line after a newline (SmolLM2, Llama 3, Qwen: "User"), where it is one
    token that spells the word alone ("User", or a newline and "User"): a base model that answers and then asks itself
    a next question stops there, and the turn marker (5 characters after the answer) is graded as trailing text.
    Empty where the tokenizer splits the word."""
    newline = tokenizer("\n", add_special_tokens=False)["input_ids"]
    ids = tokenizer("\nUser:", add_special_tokens=False)["input_ids"]
    rest = ids[len(newline) :] if ids[: len(newline)] == newline else ids  # else the newline merged into "\nUser"
    return rest[:1] if rest and tokenizer.decode(rest[:1]).strip() == "User" else []


def encode_prompt(tokenizer, messages: list[dict], fmt: str = "chat") -> list[int]:
    """messages (the task's `messages(problem)`) -> prompt token ids in prompt format `fmt` ("chat" or "plain",
    resolved by prompt_format), ending where the assistant's answer starts. In "chat", a tool call in the data is
    written as text where the template would drop it (rlvr.tasks.chat.for_template)."""
    if fmt == "plain":
        return tokenizer(plain_text(messages))["input_ids"]  # the tokenizer's own special tokens (a Llama BOS)
    from rlvr.tasks.chat import for_template

    text = tokenizer.apply_chat_template(for_template(tokenizer, messages), tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


class PromptCache:
    """encode_prompt once per problem id: a step re-draws problems it has tokenised before."""

    def __init__(self, tokenizer, task, fmt: str = "chat"):
        self.tokenizer, self.task, self.fmt = tokenizer, task, fmt
        self._ids: dict[str, list[int]] = {}

    def __call__(self, problem) -> list[int]:
        if problem.id not in self._ids:
            self._ids[problem.id] = encode_prompt(self.tokenizer, self.task.messages(problem), self.fmt)
        return self._ids[problem.id]
