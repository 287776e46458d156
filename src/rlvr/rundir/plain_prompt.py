"""A run in the plain prompt format (a base model: no chat template; rlvr.prompts.chat) in final/: what
prompt_template.json records of its prompt, and the model card's section that shows it (the card's snippet:
rlvr.rundir.card_snippet).

The prompt of a question is `text_before_question + question + text_after_question`, tokenized with the tokenizer's
own special tokens (`tok(prompt)`); a completion ends at one of `stop_ids` (end of text, or the token that starts a
next `User:` line), as it did in training.
"""

from __future__ import annotations

from rlvr.prompts.chat import plain_stop_ids, plain_text

WHY_NO_TEMPLATE = "the model is prompted as plain text (model.prompt_format: plain), not through a chat template"
_MARK = "\x00"  # stands for the question while the text around it is cut out


def plain_record(tokenizer, turns: list[dict]) -> dict:
    """prompt_template.json's "plain": the text around the question after `turns` (the task's turns before it) and
    the stop ids."""
    before, after = plain_text([*turns, {"role": "user", "content": _MARK}]).split(_MARK)
    return {
        "text_before_question": before,
        "text_after_question": after,
        "special_tokens": "the tokenizer's own: tok(prompt)",
        "stop_ids": sorted({tokenizer.eos_token_id, *plain_stop_ids(tokenizer)} - {None}),
    }


def plain_card_lines(record: dict) -> list[str]:
    """The card's "Prompt" section for the plain format: the rule, then the text with `{question}` in its place."""
    plain = record.get("plain") or {}
    lines = [
        "## Prompt",
        "",
        "Prompt format: `plain`, no chat template (model.prompt_format): each question is asked as the text below, "
        "`{question}` standing for it, tokenized with the tokenizer's own special tokens (`tok(prompt)`); a "
        "completion ends at the end-of-text token or where the model starts a next `User:` line (the token ids "
        f"{plain.get('stop_ids')}). Answer format: `{record['answer_format']}`."
        + (" Each problem has its own turns: this is the first one's." if record.get("per_problem_prompts") else ""),
        "",
    ]
    if plain:
        lines += ["```text", plain["text_before_question"] + "{question}" + plain["text_after_question"], "```", ""]
    return lines


__all__ = ["WHY_NO_TEMPLATE", "plain_card_lines", "plain_record"]
