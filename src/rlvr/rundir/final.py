"""What makes final/ travel: the training prompt written down, the tokenizer that reproduces it, a model card.

A run's model was trained on prompts the task built (a system prompt, maybe a solved example exchange, then the
question, in an answer format). Served elsewhere with a bare user message it would see different prompts and
behave differently. So final/ also holds:
- `prompt_template.json` (in final/, final/adapter and final/merged): the turns before each question, the answer
  format, and one example prompt exactly as the model saw it;
- the tokenizer in final/adapter and final/merged, its chat template made to put those turns first whenever a
  conversation has no system turn, when that is faithful: the template is changed only if rendering a bare
  question with it gives exactly the training prompt (checked here on a real problem), and left as it was
  otherwise (the reason is in prompt_template.json). A run in the plain prompt format (a base model) keeps its
  tokenizer as it is: prompt_template.json holds the text around the question and the stop ids instead
  (rlvr.rundir.plain_prompt);
- `README.md` (the model card, in final/ and copied into each folder): base model, task, algorithm, reward,
  steps, files, the prompt and how the chat template applies it, usage, how to load it without the hub (this run's
  own paths), and the held-out table once the run is evaluated (the main job adds it; `rlvr eval` of the run too,
  rlvr.rundir.card_update).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from rlvr.config import Config
from rlvr.prompts.chat import plain_text, prompt_format
from rlvr.rundir.card_snippet import plain_use_lines, use_lines
from rlvr.rundir.files import atomic_write_text
from rlvr.rundir.plain_prompt import WHY_NO_TEMPLATE, plain_card_lines, plain_record

TEMPLATE_FILE = "prompt_template.json"
CARD_FILE = "README.md"
FOLDERS = ("adapter", "merged")
MEASURED = "<!-- rlvr held-out measure:"  # what the card's held-out table measured (add_heldout), hidden when rendered


def prompt_prefix(task, problems) -> tuple[list[dict] | None, str]:
    """(the turns the task puts before every question, "") or (None, why there is no single one)."""
    prefixes = []
    for p in problems:
        msgs = task.messages(p)
        if not msgs or msgs[-1] != {"role": "user", "content": p.prompt}:
            return None, "the task's prompts do not end with the question as a user turn"
        prefixes.append(msgs[:-1])
    if not prefixes:
        return None, "the task has no problems to read its prompt from"
    if any(x != prefixes[0] for x in prefixes[1:]):
        return None, "the data gives each problem its own chat prompt"
    return prefixes[0], ""


def wrapped_template(template: str, prefix: list[dict]) -> str:
    """The chat template with `prefix` put first when a conversation has no system turn (JSON strings are valid
    Jinja string literals with the same escapes)."""
    literal = json.dumps(prefix, ensure_ascii=False)
    return (
        "{%- if messages and messages[0]['role'] != 'system' %}{%- set messages = "
        + literal
        + " + messages %}{%- endif %}"
        + template
    )


def faithful_template(tokenizer, prefix: list[dict] | None, question: str) -> tuple[str | None, str]:
    """(the wrapped chat template, "") when rendering [user: question] with it equals the training prompt;
    else (None, why the template stays as it was)."""
    template = getattr(tokenizer, "chat_template", None)
    if prefix is None:
        return None, "no single prompt prefix"
    if not prefix:
        return None, "the task adds nothing before the question"
    if not isinstance(template, str) or not template:
        return None, "the tokenizer has no single chat template"
    trained = tokenizer.apply_chat_template(
        prefix + [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True
    )
    candidate = wrapped_template(template, prefix)
    try:
        served = tokenizer.apply_chat_template(
            [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True, chat_template=candidate
        )
    except Exception as e:  # a template that will not take the wrapper
        return None, f"the wrapped template does not render ({type(e).__name__})"
    if served != trained:
        return None, "rendering a bare question with the wrapped template differs from the training prompt"
    return candidate, ""


def template_record(task, tokenizer, problems, fmt: str = "chat") -> tuple[dict, str | None]:
    """(what prompt_template.json holds, the faithful chat template or None), for prompts in format `fmt` ("chat" or
    "plain", rlvr.prompts.chat: a plain run's tokenizer is saved as it is and the record holds its text)."""
    prefix, why = prompt_prefix(task, problems)
    example = problems[0] if problems else None
    if fmt == "plain":
        template, why_not = None, WHY_NO_TEMPLATE
    else:
        template, why_not = faithful_template(tokenizer, prefix, example.prompt) if example else (None, why)
    # an episode run's opening (rlvr.environments.openings): the tools it showed, and how
    shown = getattr(task, "tools_shown", None)
    schemas, by_template = shown(example) if shown is not None and example is not None else ([], False)
    if by_template:  # a wrapped template would drop them: the served conversation must pass them itself
        template, why_not = None, "the chat template renders the tools itself: pass record['tools'] as `tools=`"
    record = {
        "prompt_format": fmt,
        "messages_before_question": prefix,
        "per_problem_prompts": prefix is None,
        "why_no_single_prefix": why or None,
        "answer_format": getattr(task, "answer_format", "boxed"),
        "chat_template": "puts messages_before_question first when a conversation has no system turn"
        if template
        else f"unchanged: {why_not or why}",
    }
    if schemas:
        record["tools"] = schemas
        record["tools_shown"] = "by the chat template's `tools`" if by_template else "in the system message"
    if example is not None:
        msgs = task.messages(example)
        extra = {"tools": schemas} if by_template else {}
        if fmt == "plain":
            text = plain_text(msgs)
            record["plain"] = plain_record(tokenizer, prefix if prefix is not None else msgs[:-1])
        elif getattr(tokenizer, "chat_template", None):
            text = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, **extra)
        else:
            text = None
        record["example"] = {"question": example.prompt, "messages": msgs, "prompt_text": text}
    return record, template


def write_prompt_artefacts(final_dir: Path, tokenizer, task, problems, fmt: str = "chat") -> dict:
    """prompt_template.json in final/ and each saved folder; the faithful tokenizer into each saved folder."""
    final_dir = Path(final_dir)
    record, template = template_record(task, tokenizer, list(problems)[:3], fmt)
    text = json.dumps(record, indent=2, ensure_ascii=False) + "\n"
    atomic_write_text(final_dir / TEMPLATE_FILE, text)
    tok = None
    if template:
        tok = copy.deepcopy(tokenizer)
        tok.chat_template = template
    for folder in FOLDERS:
        if (final_dir / folder).is_dir():
            atomic_write_text(final_dir / folder / TEMPLATE_FILE, text)
            if tok is not None:
                tok.save_pretrained(final_dir / folder)
    return record


def model_card(
    cfg: Config,
    base: str,
    loaded_from: str | None,
    steps: int,
    record: dict | None,
    heldout_md: str | None = None,
    kind: str = "RLVR",
    local_base: str | None = None,
    saved_dtype: str | None = None,
) -> str:
    """The model card's Markdown (hub front matter included). `local_base`: the folder this run loaded its base model
    from (None: handed over in memory), for loading the adapter without the hub. `saved_dtype`: the dtype
    final/merged was saved in (merged_dtype), which save_dtype "auto" resolved to."""
    algo, lora = cfg.algorithm, cfg.model.lora
    terms = ", ".join(
        f"{t.get('name', t.get('kind'))}: {t.get('kind')} x{t.get('weight', 1.0)}" for t in cfg.reward.terms
    )
    hub_id = _is_hub_id(base)  # the hub's base_model field
    front = [
        "---",
        *([f"base_model: {base}"] if hub_id else []),
        "library_name: peft" if lora.enabled else "library_name: transformers",
        "tags:",
        "- rlvr",
        f"- {algo.get('preset', 'grpo') if kind == 'RLVR' else 'sft'}",
        "---",
        "",
    ]
    rows = [
        ("base model", base + (f" (this run loaded it from `{loaded_from}`)" if loaded_from else "")),
        ("task", f"{cfg.task.name} {json.dumps(cfg.task.settings or {})}"),
        ("training", f"{kind}, algorithm {json.dumps(algo)}" if kind == "RLVR" else kind),
        ("reward", terms),
        ("steps", str(steps)),
        ("LoRA", f"r={lora.r} alpha={lora.alpha} targets={lora.target_modules}" if lora.enabled else "off"),
        ("weights", f"trained in {cfg.model.dtype}; " + _saved_row(cfg, saved_dtype)),
    ]
    lines = front + [f"# {Path(cfg.output_dir).name}: {kind} on {cfg.task.name}", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows] + ["", *_card_body(record, base, saved_dtype)]
    lines += [*_offline_lines(cfg, base, local_base), "## Held-out evaluation", ""]
    lines.append(
        heldout_md.strip()
        if heldout_md
        else f"Not evaluated yet; `rlvr eval --model {Path(cfg.output_dir).absolute()}` evaluates it with the run's "
        "own task and verifier and puts its table here."
    )
    return "\n".join(lines) + "\n"


def _saved_row(cfg: Config, saved: str | None) -> str:
    """The weights row's second half: the dtype final/merged holds, "auto" resolved to it."""
    if not cfg.model.save_merged:
        return "no final/merged (the adapter alone)"
    if cfg.model.save_dtype != "auto" or not saved:
        return f"final/merged saved in {saved or cfg.model.save_dtype}"
    return f"final/merged saved in {saved} (model.save_dtype auto: the dtype the base model's weights are stored in)"


def merged_dtype(final_dir: Path) -> str | None:
    """The dtype final/merged was saved in, as its config.json records it; None without a merged model."""
    try:
        config = json.loads((Path(final_dir) / "merged" / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return config.get("dtype") or config.get("torch_dtype")


def _is_hub_id(base: str) -> bool:
    return "/" in base and not base.startswith(("/", ".")) and " " not in base


def template_rule(prefix: list[dict]) -> str:
    """What the bundled (wrapped) chat template does, exactly: wrapped_template's one condition in words. The rule
    stays the one that was checked faithful (a bare question renders as in training); a conversation with its own
    system turn has no training rendering to be faithful to, so it is left as the user wrote it, and said so here."""
    roles = ", ".join(m["role"] for m in prefix)
    shots = sum(m["role"] == "assistant" for m in prefix)
    demo = f", the training demonstration ({shots} solved exchange{'s' * (shots > 1)}) among them" if shots else ""
    return (
        f"The chat template bundled in `adapter/` and `merged/` puts the {len(prefix)} turns below ({roles}{demo}) in "
        "front of every conversation whose first turn is not a system turn, so a bare user question renders exactly "
        "as the model was trained on it. A conversation that starts with a system turn of its own gets none of them: "
        "it renders as the base model's template renders it, without the training system prompt"
        + (" and without the demonstration" if shots else "")
        + ", a prompt the model was not trained on. To keep them with a system turn of your own, send your system "
        "turn, then the non-system turns below, then the question."
    )


def _offline_lines(cfg: Config, base: str, local_base: str | None) -> list[str]:
    """How to load this run's model without the hub, with this run's own paths: final/merged needs nothing; the
    adapter names its base by hub id (AutoPeftModelForCausalLM fetches it), so offline it goes on the local folder
    this run loaded its base from."""
    final = Path(cfg.output_dir).absolute() / "final"
    lines = ["## Load it without the hub", ""]
    if cfg.model.save_merged:
        lines += [
            f'`{final}/merged` is the whole trained model: `AutoModelForCausalLM.from_pretrained("{final}/merged")` '
            "loads it with nothing else.",
            "",
        ]
    if not cfg.model.lora.enabled:
        return lines
    if _is_hub_id(base):
        lines += [
            f"`adapter/adapter_config.json` names its base by the hub id `{base}`: "
            f'`peft.AutoPeftModelForCausalLM.from_pretrained("{final}/adapter")` fetches that base from the hub, and '
            "fails offline unless the hub cache holds it.",
            "",
        ]
    folder = Path(local_base).absolute() if local_base and Path(local_base).is_dir() else None
    if folder is None:
        return lines + ["This run's base model was handed over in memory: there is no base folder to name.", ""]
    return lines + [
        "The adapter on the base model folder this run loaded, offline:",
        "",
        "```python",
        "from peft import PeftModel",
        "from transformers import AutoModelForCausalLM, AutoTokenizer",
        f'base = AutoModelForCausalLM.from_pretrained("{folder}")',
        f'model = PeftModel.from_pretrained(base, "{final}/adapter")',
        f'tok = AutoTokenizer.from_pretrained("{final}/adapter")',
        "```",
        "",
    ]


def _card_body(record: dict | None, base: str, saved_dtype: str | None = None) -> list[str]:
    """Files, the prompt the model expects, and how to load it (rlvr.rundir.card_snippet)."""
    lines = [
        "## Files",
        "",
        f"- `adapter/`: the LoRA adapter (PEFT) and the tokenizer; its base model is named by `{base}`",
        "- `merged/`: the adapter merged into the base model, with the tokenizer "
        "(`AutoModelForCausalLM.from_pretrained`)",
        f"- `{TEMPLATE_FILE}`: the prompt the model was trained on",
        "",
    ]
    question = json.dumps((record or {}).get("example", {}).get("question") or "What is 12 + 30?", ensure_ascii=False)
    if record and record.get("prompt_format") == "plain":
        return lines + plain_card_lines(record) + use_lines(plain_use_lines(record, question), saved_dtype)
    if record:
        faithful = record["chat_template"].startswith("puts")
        lines += [
            "## Prompt",
            "",
            f"Answer format: `{record['answer_format']}`."
            + ("" if faithful else f" Chat template: {record['chat_template']}."),
            "",
        ]
        if faithful:  # the rule in full: what a conversation with a system turn of its own gets too
            lines += [template_rule(record["messages_before_question"]), ""]
        if record["messages_before_question"]:
            lines += [
                "Before each question the model saw:",
                "",
                "```json",
                json.dumps(record["messages_before_question"], indent=2, ensure_ascii=False),
                "```",
                "",
            ]
    faithful = bool(record and record["chat_template"].startswith("puts"))
    hint = "  # the chat template adds the training turns" if faithful else "  # put prompt_template.json's turns first"
    return lines + use_lines(
        [
            f'chat = [{{"role": "user", "content": {question}}}]{hint}',
            'inputs = tok.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt", return_dict=True)',
            "out = model.generate(**inputs.to(device), max_new_tokens=96, do_sample=False)",
        ],
        saved_dtype,
    )


def write_final(
    final_dir: Path,
    cfg: Config,
    tokenizer,
    task,
    steps: int,
    base: str,
    loaded_from: str | None = None,
    kind: str = "RLVR",
    local_base: str | None = None,
) -> None:
    """The prompt template, the faithful tokenizer and the model card, after the weights were saved."""
    problems = task.problems("train") or task.problems("heldout")
    fmt = prompt_format(cfg.model.prompt_format, tokenizer, cfg.model.name)
    record = write_prompt_artefacts(final_dir, tokenizer, task, problems[:3], fmt)
    card = model_card(
        cfg, base, loaded_from, steps, record, kind=kind, local_base=local_base, saved_dtype=merged_dtype(final_dir)
    )
    write_model_card(final_dir, card)


def add_heldout(final_dir: Path, heldout_md: str, measured: dict | None = None) -> None:
    """Put an evaluation table into an existing model card (and its copies); `measured` (rlvr.rundir.card_update.
    measure: problems, samples per problem, greedy, records) goes with it, in a comment a reader does not see, for the
    next evaluation to be weighed against (heldout_measured)."""
    card = Path(final_dir) / CARD_FILE
    if not card.exists():
        return
    text = card.read_text()
    head, sep, _ = text.partition("## Held-out evaluation\n")
    body = heldout_md.strip() + (f"\n\n{MEASURED} {json.dumps(measured)} -->" if measured else "") + "\n"
    write_model_card(final_dir, head + sep + "\n" + body if sep else text + "\n" + body)


def heldout_measured(final_dir: Path) -> dict | None:
    """What the card's held-out table measured, as add_heldout recorded it; None for a card without one."""
    card = Path(final_dir) / CARD_FILE
    text = card.read_text() if card.exists() else ""
    line = next((x for x in text.splitlines() if x.startswith(MEASURED)), None)
    try:
        return json.loads(line[len(MEASURED) : -len("-->")]) if line else None
    except ValueError:
        return None


def write_model_card(final_dir: Path, text: str) -> None:
    """README.md in final/ and each saved folder (a folder uploaded alone carries its card)."""
    final_dir = Path(final_dir)
    atomic_write_text(final_dir / CARD_FILE, text)
    for folder in FOLDERS:
        if (final_dir / folder).is_dir():
            atomic_write_text(final_dir / folder / CARD_FILE, text)


__all__ = [
    "write_final",
    "add_heldout",
    "heldout_measured",
    "template_rule",
    "write_prompt_artefacts",
    "model_card",
    "merged_dtype",
    "write_model_card",
    "faithful_template",
    "wrapped_template",
    "prompt_prefix",
    "TEMPLATE_FILE",
    "CARD_FILE",
]
