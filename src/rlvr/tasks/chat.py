"""Chat prompts in TRL's conversational form: each message checked and made plain, tool turns included.

A data row's prompt may be a conversation, as TRL and the hub's chat datasets write it: system, user and assistant
turns, and the demonstration of a tool call (TRL's "Tool Calling" form): an assistant turn with `tool_calls`
[{type: function, function: {name, arguments}}] and no content, then the tool's reply as a `tool` turn (`name`,
`tool_call_id`). Keys a datasets export writes as null on every message count as absent, and OpenAI's arguments as
a JSON string are decoded, so that every chat template meets the one form transformers documents.

A chat template that ignores `tool_calls` (SmolLM2's reads only role and content) would drop the call from the
prompt without a word: `for_template` writes it into the assistant's text instead, as the Hermes
`<tool_call>{json}</tool_call>` the tool episodes parse (rlvr.environments.calls), and leaves the messages as they
are for a template that renders the calls itself.

Chat rows are used as written, so two task settings do not reach them: `demo` (no demonstration goes into a chat
row) and `system_prompt` (given only to a row without a system turn of its own). `prompt_rows` says which case a
task's rows are in, for the advice a run without learning signal gets (rlvr.evaluation.learning_signal), and
`check_settings_apply` refuses a setting that reaches none of a task's rows, rather than ignoring it.
"""

from __future__ import annotations

import json

from rlvr.errors import ConfigError
from rlvr.tasks.base import DatasetError, Problem, own_messages

ROLES = ("system", "user", "assistant", "tool")
CALL_FORM = "{type: function, function: {name: text, arguments: object}}"


def chat_prompt(prompt, where: str = "row") -> tuple[str, list[dict] | None]:
    """A row's prompt -> (its question text, its chat messages or None).

    Text is the question itself. Chat messages (a list of {"role", "content"}, as TRL and the hub's chat-format
    datasets write them, tool-call demonstrations included) are kept whole, system turn and few-shot turns
    included; the question text is the last user turn (what ids, splits and the hygiene checks read). A malformed
    list is a DatasetError."""
    if not isinstance(prompt, list):
        return ("" if prompt is None else str(prompt)), None
    messages = [chat_message(m, i, where) for i, m in enumerate(prompt)]
    users = [m["content"] for m in messages if m["role"] == "user"]
    if not users or messages[-1]["role"] != "user":
        raise DatasetError(f"{where}: a chat prompt must end with a user turn")
    return users[-1], messages


def chat_message(message, i: int, where: str) -> dict:
    """One prompt message, checked, as {role, content} (+ tool_calls on an assistant turn, name and tool_call_id
    on a tool turn); a DatasetError names the message and the form it must have."""
    m = {k: v for k, v in message.items() if v is not None} if isinstance(message, dict) else {}
    calls = (m.get("tool_calls") or None) if m.get("role") == "assistant" else None  # an export's [] is no call
    if calls is not None:
        m.setdefault("content", "")  # TRL's call turn has no content; templates that read only content need one
    if m.get("role") not in ROLES or not isinstance(m.get("content"), str):
        raise DatasetError(f"{where}: prompt message {i} must be {{role: {' | '.join(ROLES)}, content: text}}")
    out = {"role": m["role"], "content": m["content"]}
    if calls is not None:
        out["tool_calls"] = tool_calls(calls, i, where)
    if m["role"] == "tool":
        out.update({k: str(m[k]) for k in ("name", "tool_call_id") if k in m})
    return out


def tool_calls(calls, i: int, where: str) -> list[dict]:
    """An assistant turn's calls in transformers' form; a call without the `function` wrapper is wrapped."""
    if not isinstance(calls, list) or not calls:
        raise DatasetError(f"{where}: prompt message {i}: tool_calls must be a list of {CALL_FORM}")
    out = []
    for j, call in enumerate(calls):
        fn = call.get("function", call) if isinstance(call, dict) else None
        args = fn.get("arguments") if isinstance(fn, dict) else None
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                args = None
        if not (isinstance(fn, dict) and isinstance(fn.get("name"), str) and isinstance(args, dict)):
            raise DatasetError(f"{where}: prompt message {i}: tool_calls[{j}] must be {CALL_FORM}")
        made = {"id": str(call["id"])} if call.get("id") is not None else {}
        out.append({**made, "type": "function", "function": {"name": fn["name"], "arguments": args}})
    return out


def call_text(call: dict) -> str:
    """One call as the Hermes / Qwen text the `hermes` parser reads (as rlvr.tasks.tool_arithmetic writes it)."""
    fn = call["function"]
    return "<tool_call>\n" + json.dumps({"name": fn["name"], "arguments": fn["arguments"]}) + "\n</tool_call>"


def for_template(tokenizer, messages: list[dict]) -> list[dict]:
    """`messages` as `tokenizer`'s chat template should see them: unchanged when no turn calls a tool or the
    template renders `tool_calls`; else each call written after its turn's text (see the module doc)."""
    if not any(m.get("tool_calls") for m in messages):
        return messages
    bare = [{k: v for k, v in m.items() if k != "tool_calls"} for m in messages]

    def render(ms):
        return tokenizer.apply_chat_template(ms, tokenize=False, add_generation_prompt=True)

    return messages if render(messages) != render(bare) else calls_as_text(messages)


def calls_as_text(messages: list[dict]) -> list[dict]:
    """`messages` with each assistant turn's tool calls written after its text (call_text) and `tool_calls` dropped:
    for a chat template that ignores them (for_template) and for the plain prompt format (rlvr.prompts.chat)."""
    return [
        {
            **{k: v for k, v in m.items() if k != "tool_calls"},
            "content": "\n".join([m["content"]] * bool(m["content"]) + [call_text(c) for c in calls]),
        }
        if (calls := m.get("tool_calls"))
        else m
        for m in messages
    ]


def prompt_rows(problems: list[Problem]) -> str:
    """What a task's rows give as prompts: "text" when some row is a text question (system_prompt and demo apply
    to it), "chat" when every row is chat messages (no demonstration; the system prompt only where a row has no
    system turn), "own_system" when every row is chat messages with a system turn of its own (neither applies)."""
    chats = [c for c in map(own_messages, problems) if c]
    if not chats or len(chats) < len(problems):
        return "text"
    return "own_system" if all(any(m["role"] == "system" for m in c) for c in chats) else "chat"


def check_settings_apply(problems: list[Problem], source: str, demo, system_prompt: str | None) -> None:
    """Refuse a demonstration of one's own (`demo` as turns) when every row is chat messages, and a `system_prompt`
    when every row has its own system turn: each would reach no prompt (a ConfigError naming the setting).
    "auto" and "none" are left alone: the default, and a no-op on chat rows by its own definition."""
    rows = prompt_rows(problems)
    if isinstance(demo, list) and rows in ("chat", "own_system"):
        raise ConfigError(
            f"task.settings.demo: every row of {source} is chat messages, used as written, so this demonstration "
            "would never be shown; put the solved exchange into the rows' own turns, before the question, or drop "
            "the setting"
        )
    if system_prompt and rows == "own_system":
        raise ConfigError(
            f"task.settings.system_prompt: every row of {source} has a system turn of its own, used as written, so "
            "this system prompt would never be shown; write the instruction into the rows' system turns, or drop "
            "the setting"
        )


__all__ = [
    "ROLES",
    "prompt_rows",
    "check_settings_apply",
    "chat_prompt",
    "chat_message",
    "tool_calls",
    "call_text",
    "for_template",
    "calls_as_text",
]
