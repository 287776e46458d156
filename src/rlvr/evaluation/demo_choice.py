"""`demo: auto`, decided by measurement: does a solved demonstration before each question help this model?

A small model that does not reason (the embedded 135M) never writes `\\boxed{}` from a system prompt alone, and one
solved exchange turns its every `no_answer` into an answer. A model that reasons step by step does the opposite: shown
"The answer is \\boxed{46}." it copies the one-line form and skips its reasoning (Qwen2.5-Coder-0.5B-Instruct on word
problems of several steps, greedy: 0.533 without, 0.379 with; issue 72). Which one a model is cannot be told from its
name, so it is measured: the start model answers the same PROBLEMS training problems (spread over the bands, greedy, at
the run's completion length) once with the demonstration and once without, each graded by the task's own reward, and

- the demonstration is kept when the model answers correctly more often with it, or as often and in the answer format
  more often (the 135M's case: nothing correct either way, boxed only when shown);
- otherwise the model's own answers are kept, without it: a tie keeps the model's own form, since a demonstration
  the measurement cannot tell apart is a prompt the model did not need.

Training problems only: the choice never looks at a held-out answer. The demonstration's question is out of the
train split in both arms (rlvr.tasks.demo). The choice, with both arms' figures, goes into the run's demo.json and
report, and into `rlvr eval`'s summary; a run records the chosen setting (the turns, or "none") in its config.yaml,
so that every later phase and every evaluation of the run uses the same prompt without measuring again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from rlvr.tasks.answer_formats import ANSWER_FORMATS

# Training problems each arm answers. 16 greedy answers a side tell a 0.38-against-0.53 difference apart about as
# often as not, and a 0-against-0.6 format difference always; it costs 32 completions, about one RL step's quarter.
PROBLEMS = 16


@dataclass
class DemoChoice:
    """What `demo: auto` chose and why: `chosen` ("demonstration" or "none"), its turns, each arm's figures
    ({"correct", "format", "mean_chars"} as fractions and a mean over `problems` greedy answers) and the reason."""

    chosen: str
    turns: list[dict]
    figures: dict[str, dict]
    problems: int
    reason: str = ""
    settings: dict = field(default_factory=dict)  # the task settings the run records: {"demo": turns or "none"}, ...

    def to_dict(self) -> dict:
        return asdict(self)


def choice_markdown(choice: dict) -> str:
    """One paragraph for a report or a summary from a DemoChoice's dict: the choice, both arms' figures, the reason."""
    arms = "; ".join(
        f"{arm}: {f['correct']:.2f} correct, {f['format']:.2f} in the format, {f['mean_chars']:.0f} characters"
        for arm, f in choice["figures"].items()
    )
    return (
        f"**Demonstration (`demo: auto`): {choice['chosen']}.** Measured on {choice['problems']} training problems, "
        f"greedy, with and without it ({arms}): {choice['reason']}."
    )


def decide(figures: dict[str, dict], problems: int) -> tuple[str, str]:
    """(chosen arm, why) from both arms' figures (the module doc's rule)."""
    d, n = figures["demonstration"], figures["none"]
    count = lambda f, k: round(f[k] * problems)  # noqa: E731 - figures are fractions of `problems`
    if d["correct"] > n["correct"]:
        return "demonstration", (
            f"the model answers correctly more often with it ({count(d, 'correct')} against {count(n, 'correct')})"
        )
    if d["correct"] == n["correct"] and d["format"] > n["format"]:
        return "demonstration", (
            f"as often correct either way, and in the answer format more often with it ({count(d, 'format')} against "
            f"{count(n, 'format')})"
        )
    if d["correct"] == n["correct"]:
        return "none", "as good without it, so the model keeps its own form (its chain of thought, where it has one)"
    return "none", (
        f"the model answers correctly more often without it ({count(n, 'correct')} against {count(d, 'correct')})"
    )


Generate = Callable[[list[list[dict]]], list[str]]  # chats -> one greedy completion each


def measure(task, generate: Generate, reward, problems: int = PROBLEMS) -> DemoChoice | None:
    """Both arms of `task.demo_options` on its first `problems` training problems (spread over bands): the choice,
    or None when the task has nothing to decide (a setting other than "auto", no demonstration to show). The task's
    `demo` is set to the chosen turns."""
    from rlvr.prompts.stream import spread_over_bands
    from rlvr.tasks.base import task_messages, use_demo

    options = getattr(task, "demo_options", None) or {}
    asked = spread_over_bands(task.problems("train"), problems)
    if not options or not asked:
        return None
    check = ANSWER_FORMATS.get(getattr(task, "answer_format", None) or "boxed").check
    figures = {}
    for arm, (turns, _) in options.items():
        texts = generate([task_messages(task.system_prompt, p, turns) for p in asked])
        verdicts = reward(texts, asked).verdicts
        figures[arm] = {
            "correct": sum(v.status == "correct" for v in verdicts) / len(asked),
            "format": sum(check(t)[0] == "correct" for t in texts) / len(asked),
            "mean_chars": sum(map(len, texts)) / len(asked),
        }
    chosen, reason = decide(figures, len(asked))
    settings = options[chosen][1]
    use_demo(task, chosen)  # its turns, and the train split its recorded setting gives
    return DemoChoice(chosen, list(task.demo), figures, len(asked), reason, settings)


def greedy(sampler, tokenizer, max_new_tokens: int, fmt: str) -> Generate:
    """A Generate over a rollout sampler: one greedy completion per chat, at `max_new_tokens`."""
    import torch

    from rlvr.prompts.chat import encode_prompt

    def generate(chats: list[list[dict]]) -> list[str]:
        ids = [encode_prompt(tokenizer, chat, fmt) for chat in chats]
        out = sampler.generate(
            ids, 1, max_new_tokens=max_new_tokens, temperature=0.0, generator=torch.Generator().manual_seed(0)
        )
        return list(out.texts)

    return generate


def choose_for_config(cfg, policy=None):
    """(cfg with `task.settings.demo` set to the choice, the DemoChoice) for a config whose task says `demo: auto`:
    the start model (cfg.model, or `policy` = (model, tokenizer)) is loaded, measured and let go; (cfg, None) when the
    task has nothing to decide. What the recipes call before their run directory records the config."""
    from dataclasses import replace

    from rlvr.environments.build import episodes_of
    from rlvr.policy.build import load_seeded
    from rlvr.policy.load import resolve_model_path
    from rlvr.prompts.chat import prompt_format
    from rlvr.sampling import BACKENDS, build_sampler
    from rlvr.tasks import load_task
    from rlvr.verifiers.compose import task_reward

    task = load_task(cfg.task.name, **cfg.task.settings)
    if not getattr(task, "demo_options", None) or episodes_of(cfg.episode):
        return cfg, None
    if policy is None:
        resolve_model_path(cfg.model.name)  # a hub id the hub cannot give: one line, before anything loads
    model, tokenizer = load_seeded(cfg, policy)
    fmt = prompt_format(cfg.model.prompt_format, tokenizer, cfg.model.name, False)
    model.eval()
    # a local backend samples here as training will; an engine or servers are not started twice for 32 answers: the
    # fast sampler (the default backend) measures in their place
    rollout = cfg.rollout if BACKENDS.get(cfg.rollout.backend).local_cpu else replace(cfg.rollout, backend="fast")
    sampler = build_sampler(rollout, model, tokenizer, prompt_format=fmt)
    choice = measure(
        task, greedy(sampler, tokenizer, cfg.rollout.max_new_tokens, fmt), task_reward(cfg.reward, task)[1]
    )
    if choice is None:
        return cfg, None
    settings = {**cfg.task.settings, **choice.settings}
    return replace(cfg, task=replace(cfg.task, settings=settings)), choice


def settled(cfg, folder, resume: bool, policy=None):
    """(cfg with `demo: auto` made concrete, the choice's record or None) for a job into `folder`: read back from its
    demo.json when it resumes (a rerun asks the same prompt), else measured (choose_for_config)."""
    if resume:
        cfg, choice = read_back(cfg, folder)
        if choice is not None:
            return cfg, choice
    cfg, measured = choose_for_config(cfg, policy)
    return cfg, None if measured is None else measured.to_dict()


def read_back(cfg, folder):
    """(cfg with the task settings a run's demo.json recorded, the record), or (cfg, None) where there is none."""
    import json
    from dataclasses import replace
    from pathlib import Path

    saved = Path(folder) / DEMO_FILE
    if not saved.exists():
        return cfg, None
    choice = json.loads(saved.read_text())
    settings = {**cfg.task.settings, **choice["settings"]}
    return replace(cfg, task=replace(cfg.task, settings=settings)), choice


def record_demo(run, choice: dict) -> None:
    """A run directory's record of demo "auto"'s choice: demo.json, and its config.yaml's task settings made
    concrete, so that `rlvr eval` of the run and a resume ask the same prompt without measuring again."""
    import json

    from rlvr.config import dump
    from rlvr.rundir.files import atomic_write_text, read_config

    atomic_write_text(run.path / DEMO_FILE, json.dumps(choice, indent=2) + "\n")
    cfg = read_config(run.path)
    settings = {**cfg.task.settings, **choice["settings"]}
    atomic_write_text(
        run.path / "config.yaml", dump({**cfg.to_dict(), "task": {"name": cfg.task.name, "settings": settings}})
    )


DEMO_FILE = "demo.json"  # in a run directory (and the main job's folder): the choice, with both arms' figures

__all__ = [
    "PROBLEMS",
    "DemoChoice",
    "choice_markdown",
    "decide",
    "measure",
    "greedy",
    "choose_for_config",
    "settled",
    "DEMO_FILE",
]
