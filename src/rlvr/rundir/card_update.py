"""The model card after `rlvr eval` of a run's final model: its held-out section becomes that evaluation, when the
evaluation measured what the card describes (the run's own task, task settings and reward terms, on problems the run
did not train on), so that final/README.md no longer says "Not evaluated" of an evaluated model. Each copy of the
card (final/, adapter/, merged/) is replaced atomically (rlvr.rundir.final.add_heldout)."""

from __future__ import annotations

import time
from pathlib import Path

from rlvr.rundir.final import CARD_FILE, add_heldout


def final_of(model) -> Path | None:
    """The final/ folder whose card describes `model` as `rlvr eval` was given it: a run directory (RUN), RUN/final,
    RUN/final/merged or RUN/final/adapter; None for anything else (a checkpoint is not the model the card describes)."""
    p = Path(model) if isinstance(model, (str, Path)) else None
    for final in (p / "final", p, p.parent) if p is not None else ():
        if final.name == "final" and (final.parent / "config.yaml").is_file() and (final / CARD_FILE).is_file():
            return final
    return None


def eval_section(summary_md: str, setup: dict, records_dir) -> str:
    """The card's held-out section from one evaluation: what was measured and how, in one line, then its tables."""
    greedy = " and a greedy decode" if setup.get("greedy") else ""
    return (
        f"Measured by `rlvr eval` on {time.strftime('%Y-%m-%d', time.gmtime())}: the `{setup['split']}` split of "
        f"`{setup['task']}` ({setup.get('limit') or 'all'} problems), {setup['n']} samples per problem at temperature "
        f"{setup['temperature']}{greedy}, at most {setup['max_new_tokens']} new tokens; records in `{records_dir}`.\n\n"
        + summary_md.strip()
    )


def card_after_eval(model, summary_md: str, summary: dict, records_dir) -> str | None:
    """After `rlvr eval` of a run's final model: its card's held-out section becomes this evaluation (each copy
    written atomically) when it measured what the card describes: the run's own task, task settings and reward terms,
    on problems it did not train on. Returns the line saying what happened to the card; None when `model` is no
    run's final model."""
    import yaml

    final = final_of(model)
    if final is None:
        return None
    card, setup = final / CARD_FILE, summary["setup"]
    run = yaml.safe_load((final.parent / "config.yaml").read_text()) or {}
    task, terms = run.get("task", {}), run.get("reward", {}).get("terms")
    overlap = summary.get("hygiene", {}).get("contaminated", 0)
    for differs, why in (
        (
            setup["task"] != task.get("name"),
            f"this evaluation is on {setup['task']}, the run trained on {task.get('name')}",
        ),
        (
            (setup.get("task_settings") or {}) != (task.get("settings") or {}),
            "this evaluation changed the task settings",
        ),
        ((setup.get("reward") or {}).get("terms") != terms, "this evaluation graded with other reward terms"),
        (overlap, f"{overlap} of the evaluated problems are training problems"),
    ):
        if differs:
            return f"model card {card} left as it was: {why}"
    add_heldout(final, eval_section(summary_md, setup, records_dir))
    return f"model card {card} (and its copies in adapter/ and merged/) now shows this evaluation"


__all__ = ["final_of", "eval_section", "card_after_eval"]
