"""A demonstration before each question (task setting `demo`): one solved exchange that shows the answer format.

A small model asked for `\\boxed{}` by a system prompt alone often never writes it, and a run whose every completion
is `no_answer` has nothing to learn from (docs/your-data.md has the figures). The built-in tasks show one solved
exchange (arithmetic's `one_shot`); `demo` gives data of your own the same:

- "auto": decided by measurement on the start model (rlvr.evaluation.demo_choice): its own answers with and without
  one solved training problem of the easiest band shown first, keeping the demonstration only where it answers
  correctly more often (or, as often, in the format more often). The demonstration shows work when the gold has
  work (the row's `trace`, or a worked gold's reasoning: "48 / 2 = 24 ... \\boxed{24}"), else the gold alone in
  the task's answer format ("The answer is \\boxed{42}." or "<answer>42</answer>"): a model shown an answer without
  work copies that form and skips its reasoning. Where nothing measures (a task built by hand), "auto" shows the
  demonstration. The easiest band is the first in rlvr's band order (names
  with their numbers compared as numbers: `1-step` before `2-step` before `10-step`), the problem the first of that
  band by id that has a text question, a gold answer and no copy in the validation or held-out split (none when the
  train split has a single problem);
- "none": the question alone, after the system prompt;
- an exchange of your own, as chat messages: user, assistant (and more pairs), the last assistant turn giving its
  answer in the task's answer format.

The jsonl task's default is "auto": on the embedded default model and docs/examples/word_problems the demonstration
cut the held-out completions without an answer from 99.6% to 72.5% (docs/your-data.md); on Qwen2.5-Coder-0.5B-Instruct,
which reasons, a one-line demonstration cut its greedy accuracy on word problems from 0.533 to 0.379 (issue 72), so
which one helps is measured, not assumed. The hub task's is "none", so that a
hub run's prompts stay as they were.

The demonstration's question is left out of training: asked it, the model could copy the answer from the turn
before, a reward for copying rather than solving. A user-written one that asks a validation or held-out question is
refused, since it would give that problem's answer away. A row whose prompt is chat messages of its own gets no
demonstration: it is used as written (rlvr.tasks.base.task_messages)."""

from __future__ import annotations

import re

from rlvr.errors import ConfigError
from rlvr.tasks.answer_formats import ANSWER_FORMATS
from rlvr.tasks.base import Problem, own_messages
from rlvr.tasks.hygiene import text_hash

DEMO_CHOICES = ("auto", "none")
FORM = "[{role: user, content: QUESTION}, {role: assistant, content: SOLUTION ending in the answer}]"


def band_order(name: str) -> list:
    """Sort key of a band name: digit runs compare as numbers ("2-step" before "10-step")."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", name) if t]


def check_demo(demo, answer_format: str = "boxed"):
    """`demo` as given, once it is "auto", "none" or a solved exchange (a ConfigError naming task.settings.demo
    otherwise); an exchange comes back as plain {role, content} messages."""
    if demo is None or demo in DEMO_CHOICES:
        return "none" if demo is None else demo
    if not isinstance(demo, list) or not demo:
        why = " (YAML reads yes, no, true and false as booleans)" if isinstance(demo, bool) else ""
        raise ConfigError(
            f"task.settings.demo: give {' or '.join(DEMO_CHOICES)} or a solved exchange {FORM}; got {demo!r}{why}"
        )
    turns = []
    for i, m in enumerate(demo):
        role = ("user", "assistant")[i % 2]
        if not isinstance(m, dict) or m.get("role") != role or set(m) != {"role", "content"}:
            raise ConfigError(
                f"task.settings.demo[{i}]: expected {{role: {role}, content: text}}, got {m!r}; the turns go user, "
                f"assistant, ... {FORM} (a system turn is task.settings.system_prompt)"
            )
        if not isinstance(m["content"], str) or not m["content"].strip():
            raise ConfigError(f"task.settings.demo[{i}]: empty content; {role} turns are text")
        turns.append({"role": role, "content": m["content"]})
    fmt = ANSWER_FORMATS.get(answer_format, "task.settings.answer_format")
    if turns[-1]["role"] != "assistant" or fmt.mark not in turns[-1]["content"]:
        raise ConfigError(
            f"task.settings.demo: the last turn must be the assistant's answer in the task's answer format "
            f"({fmt.shape}), "
            f"which is what the demonstration is there to show; got {turns[-1]['content']!r}"
        )
    return turns


def resolve_demo(demo, splits: dict[str, list[Problem]], answer_format: str = "boxed"):
    """(the demonstration's turns, the splits with its question left out of training). `demo` is checked first;
    "auto" finds no problem to show (no train problem with a text question and a gold) -> no turns."""
    demo = check_demo(demo, answer_format)
    if demo == "none" or demo is False:
        return [], splits
    others = {text_hash(p.prompt): p for s, ps in splits.items() if s != "train" for p in ps}
    if demo == "auto":
        problem = auto_problem(splits.get("train", []), others)
        if problem is None:
            return [], splits
        demo = [
            {"role": "user", "content": problem.prompt},
            {"role": "assistant", "content": shown(problem, answer_format)},
        ]
    for turn in demo[::2]:
        copy = others.get(text_hash(turn["content"]))
        if copy is not None:
            raise ConfigError(
                f"task.settings.demo: its question is problem {copy.id!r} of another split than train; it would give "
                "that problem's answer away, so write the demonstration on another question"
            )
    asked = {text_hash(t["content"]) for t in demo[::2]}
    train = [p for p in splits.get("train", []) if text_hash(p.prompt) not in asked]
    return demo, {**splits, "train": train}


def auto_problem(train: list[Problem], others: dict) -> Problem | None:
    """demo "auto"'s problem: the first by id of the easiest band among the train problems it can show; none from a
    train split of one problem, which showing would leave with nothing to train on."""
    if len(train) < 2:
        return None
    fit = [p for p in train if p.answer is not None and not own_messages(p) and text_hash(p.prompt) not in others]
    return min(fit, key=lambda p: (band_order(p.band), p.id), default=None)


def shown(problem: Problem, answer_format: str) -> str:
    """A demonstration's assistant turn for a problem: its worked solution where the data has one (`trace` in the
    task's answer format, as add_traces writes it), else its gold alone in that format."""
    fmt = ANSWER_FORMATS.get(answer_format)
    trace = problem.meta.get("trace") if isinstance(problem.meta, dict) else None
    if isinstance(trace, str) and fmt.mark in trace:
        return trace
    return fmt.shown.format(problem.answer)


def add_traces(problems, answer_format: str) -> None:
    """Each problem whose gold came with its work (meta["reasoning"], a worked gold) gets that work as its reasoning
    trace in the task's answer format (meta["trace"], what `rlvr sft` with sft.source=reference and a demonstration
    read), unless the row has a trace of its own."""
    fmt = ANSWER_FORMATS.get(answer_format)
    for p in problems:
        work = p.meta.get("reasoning") if isinstance(p.meta, dict) else None
        if work and "trace" not in p.meta and p.answer is not None:
            p.meta["trace"] = fmt.worked.format(reasoning=work, answer=p.answer)


def demo_options(setting, turns: list[dict], key: str = "demo", shown_value=None, hidden_value="none") -> dict:
    """What a measurement chooses between (rlvr.evaluation.demo_choice), as {arm: (turns, the task settings that
    give that arm without measuring)}: the demonstration and none when the setting is "auto" and there is a
    demonstration to show; {} when there is nothing to decide. `key`: the task's setting (`demo`, arithmetic's
    `one_shot`); `shown_value`: its value for the demonstration (default: the turns themselves)."""
    if setting != "auto" or not turns:
        return {}
    shown = list(turns) if shown_value is None else shown_value
    return {"demonstration": (list(turns), {key: shown}), "none": ([], {key: hidden_value})}
