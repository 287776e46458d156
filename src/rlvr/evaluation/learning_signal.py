"""Whether a run's steps carried any learning signal and, when they did not, why and what to do about it.

A group whose samples all got the same reward has advantage 0 on every row: it adds nothing to the gradient, and
a step with no other group makes no update at all (rlvr.training.step skips the optimizer). A run of such steps
spends its budget and saves a final model that learned nothing. The step's metrics line already says which case
it is (`groups/nonzero_var_frac`, `verdict/<status>_frac`); `diagnose` turns those figures into one sentence
naming the cause and the remedies rlvr has, so that the training loop's warnings, the run's signal.json and the
report say the same thing. Everything here is a pure function of figures a run already wrote.
"""

from __future__ import annotations

from pathlib import Path

from rlvr.rundir.files import read_config, read_jsonl
from rlvr.tasks.answer_formats import ANSWER_FORMATS
from rlvr.verifiers.base import FAULT_STATUSES
from rlvr.verifiers.registry import runs_tests

# More than this share of no_answer verdicts, with no informative group, is a format problem before anything else:
# the grader cannot read the answers, so whether they are right is not yet the question.
MOSTLY_NO_ANSWER = 0.5
# At least this share of fault verdicts (the grader failed: error; the gold unusable: invalid_gold), with no
# informative group, is the grading's fault before anything else: a fault earns nothing whatever the completion
# says, so neither the format nor the difficulty is the question yet.
MOSTLY_FAULTS = 0.5
# What each fault verdict means, and where to look (samples.jsonl gives each fault's detail)
FAULT_CAUSES = {
    "invalid_gold": "invalid_gold verdicts are gold answers the grader cannot read (fix the data's gold column, or "
    "grade with a kind that reads it)",
    "error": "error verdicts are the grader failing (a reward function that raises or returns no number, a grader "
    "that cannot run)",
}
# Steps in a row without an informative group before the loop (and the report) warn. One step can be bad luck with
# few prompts (4 prompts x 8 samples at a 10% success rate: 3% of steps); three in a row is a pattern (3e-5).
WARN_STREAK = 3

# How each answer format looks, for the message (each entry of rlvr.tasks.answer_formats says, and code tasks)
FORMATS = {**{e.name: e.value.shape for e in ANSWER_FORMATS.entries()}, "code": "one ```python block"}


def has_signal(row: dict) -> bool:
    """Whether a step had at least one informative group (a row without the figure counts as having one), or a
    distillation teacher's per-token signal on some token (distill/tokens)."""
    frac = row.get("groups/nonzero_var_frac")
    return frac is None or frac > 0 or row.get("distill/tokens", 0) > 0


def answer_format_of(task_settings: dict, terms: list) -> str:
    """The answer format a run's completions must use, from its task settings and resolved reward terms: "code"
    when a term's kind runs tests (rlvr.verifiers.registry.runs_tests), else the task's answer_format (boxed unless the settings say tags)."""
    if any(isinstance(t, dict) and runs_tests(t.get("kind")) for t in terms or ()):
        return "code"
    return (task_settings or {}).get("answer_format") or "boxed"


# How to ask for the format and show it, by what the task's rows give as prompts (rlvr.tasks.chat.prompt_rows): chat
# rows are used as written, so the settings that add turns (system_prompt, demo) reach only some rows, or none.
ASK_AND_SHOW = {
    "text": (
        "ask for the format in task.settings.system_prompt",
        "show it (task.settings.demo on jsonl and hub: auto, one solved training problem, or a worked exchange of "
        "your own; task.settings.one_shot: true on arithmetic)",
    ),
    "chat": (
        "ask for the format in task.settings.system_prompt (the rows without a system turn of their own get it)",
        "show it in the rows' own turns, a solved user/assistant exchange before the question (chat rows are used "
        "as written: task.settings.demo does not reach them)",
    ),
    "own_system": (
        "ask for the format in the rows' own system turns (chat rows with a system turn of their own are used as "
        "written: task.settings.system_prompt and task.settings.demo do not reach them)",
        "show it in the rows' own turns, a solved user/assistant exchange before the question; where their system "
        "turns ask for another answer format, grade that one (task.settings.answer_format: "
        + " or ".join(e.name for e in ANSWER_FORMATS.entries())
        + ")",
    ),
}


def _format_remedies(answer_format: str, prompts: str = "text") -> str:
    """What rlvr has for a model that never writes the answer format (each names its config key), for a task whose
    rows give `prompts` (ASK_AND_SHOW's keys)."""
    ask, show = ASK_AND_SHOW.get(prompts, ASK_AND_SHOW["text"])
    sft = (
        "fine-tune on worked solutions first (rlvr sft with sft.source: reference, the traces in the data's "
        "sft.reference_field column or written by a function of the row, sft.reference, then model.name: that run's "
        "final/merged; train.init_from_sft: true in rlvr run)"
    )
    if answer_format == "code":
        return f"{ask}; {sft}"
    return (
        f"{ask}, or {show}; {sft}; grade answers leniently "
        "(require_boxed: false on the correctness term of reward.terms: the final answer is then read even outside "
        "the format); a format reward (a reward.terms term of kind boxed_format) pays only answers already in the "
        "format, so it cannot start from none"
    )


def diagnose(row: dict, answer_format: str = "boxed", prompts: str = "text") -> str | None:
    """One step's figures -> why it carried no learning signal and what to do, or None when it had some; `prompts`:
    what the task's rows give as prompts (rlvr.tasks.chat.prompt_rows), which decides how to ask for the format.

    No informative group and mostly faults (error, invalid_gold): the grading failed, not the model (fix it first).
    Mostly no_answer: the model never writes the task's answer format (fix the prompt or the grading first). None
    correct: too hard. All correct: too easy. Otherwise every prompt was either always or never solved."""
    if has_signal(row):
        return None
    frac = {s: float(row.get(f"verdict/{s}_frac") or 0.0) for s in ("correct", "wrong", "no_answer", *FAULT_STATUSES)}
    head = (
        "no group's samples got different rewards (groups/nonzero_var_frac 0), so every advantage was 0 and the "
        "step made no update"
    )
    faults = [s for s in FAULT_STATUSES if frac[s]]
    shares = ", ".join(f"{frac[s]:.0%} {s}" for s in faults)
    if sum(frac[s] for s in faults) >= MOSTLY_FAULTS:
        return (
            f"{head}; {sum(frac[s] for s in faults):.0%} of the completions got a fault verdict ({shares}), which "
            f"earns nothing whatever the completion says: {'; '.join(FAULT_CAUSES[s] for s in faults)}. Not the "
            "data's difficulty: fix the grading before anything else (samples.jsonl gives each fault's detail)"
        )
    if frac["no_answer"] > MOSTLY_NO_ANSWER:
        shape = FORMATS.get(answer_format, answer_format)
        return (
            f"{head}; {frac['no_answer']:.0%} of the completions gave no answer: the model never writes the task's "
            f"answer format ({shape}). Fix the prompt or the grading before anything else: "
            f"{_format_remedies(answer_format, prompts)}"
        )
    if frac["correct"] == 0:
        return (
            f"{head}; none of the completions was correct ({frac['wrong']:.0%} wrong, {frac['no_answer']:.0%} no "
            f"answer{', ' + shares if shares else ''}): the problems are too hard for the model. Train on easier bands "
            "(curriculum: {kind: fixed, weights: {<band>: <share>}}, or {kind: adaptive} to follow the bands it can "
            "solve) or easier problems, and draw more samples per prompt (rollout.group_size) so that a rare success "
            "lands in a group"
        )
    if frac["correct"] == 1:
        return (
            f"{head}; every completion was correct: the problems are too easy for the model, there is nothing left "
            "to learn from them. Train on harder bands (curriculum weights toward them) or harder problems"
        )
    return (
        f"{head}; {frac['correct']:.0%} of the completions were correct, but each prompt's samples were all right or "
        "all wrong: draw more samples per prompt (rollout.group_size) or sample at a higher rollout.temperature"
    )


def streaks(rows: list[dict]) -> list[tuple[int, int]]:
    """(first step, last step) of each run of consecutive metrics lines without an informative group, in order."""
    out: list[tuple[int, int]] = []
    open_from = None
    for i, row in enumerate(rows):
        if not has_signal(row):
            open_from = row.get("step", i) if open_from is None else open_from
            last = row.get("step", i)
        elif open_from is not None:
            out.append((open_from, last))
            open_from = None
    if open_from is not None:
        out.append((open_from, last))
    return out


def trailing_streak(rows: list[dict]) -> int:
    """How many of the last metrics lines in a row had no informative group (what a resumed run continues)."""
    n = 0
    for row in reversed(rows):
        if has_signal(row):
            break
        n += 1
    return n


def signal_warning(
    rows: list[dict], answer_format: str = "boxed", warn_after: int = WARN_STREAK, prompts: str = "text"
) -> str | None:
    """The report's line for a run's metrics: its longest run of steps without an informative group, when that is at
    least `warn_after` steps (or the whole of a shorter run), with the diagnosis of its last step; None otherwise."""
    runs = streaks(rows)
    if not runs:
        return None
    first, last = max(runs, key=lambda r: r[1] - r[0])  # the earliest of the longest
    length = last - first + 1
    if length < min(warn_after, len(rows)):
        return None
    by_step = {r.get("step"): r for r in rows}
    where = f"step {first}" if first == last else f"steps {first}-{last}"
    return (
        f"No learning signal in {where} ({length} of the run's {len(rows)} steps in a row): "
        f"{diagnose(by_step.get(last, rows[-1]), answer_format, prompts)}."
    )


def run_signal_warning(run_dir: str | Path, prompts: str = "text") -> str | None:
    """`signal_warning` for a run directory: its metrics.jsonl, in the answer format its config.yaml grades, for a
    task whose rows give `prompts` (what the run recorded: rlvr.training.signal_watch.recorded_prompts)."""
    run_dir = Path(run_dir)
    rows = read_jsonl(run_dir / "metrics.jsonl", skip_torn=True) if (run_dir / "metrics.jsonl").exists() else []
    cfg = read_config(run_dir)
    fmt = answer_format_of(cfg.task.settings, cfg.reward.terms)
    return signal_warning(rows, fmt, prompts=prompts)


__all__ = [
    "MOSTLY_NO_ANSWER",
    "MOSTLY_FAULTS",
    "WARN_STREAK",
    "FORMATS",
    "has_signal",
    "answer_format_of",
    "diagnose",
    "streaks",
    "trailing_streak",
    "signal_warning",
    "run_signal_warning",
]
