"""The model card after `rlvr eval` of a run's final model: its held-out section becomes that evaluation, when the
evaluation measured what the card describes (the run's own task, task settings and reward terms, on problems the run
did not train on) at least as fully as the table the card shows, so that final/README.md no longer says "Not
evaluated" of an evaluated model, and a quick look (a few problems, the greedy decode alone) does not replace the
table of a full evaluation. Each copy of the card (final/, adapter/, merged/) is replaced atomically
(rlvr.rundir.final.add_heldout)."""

from __future__ import annotations

import time
from pathlib import Path

from rlvr.rundir.final import CARD_FILE, add_heldout, heldout_measured


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


def measure(summary: dict, records_dir) -> dict:
    """What an evaluation measured, as a card records it: problems, samples per problem, whether the greedy decode
    was scored, and where its records are."""
    setup = summary.get("setup", {})
    return {
        "problems": summary["overall"]["n_problems"],
        "samples": setup.get("n", summary["overall"].get("samples_per_problem", 0)),
        "greedy": bool(setup.get("greedy", True)),
        "records": str(Path(records_dir).absolute()),
    }


def measured_text(m: dict) -> str:
    """A measure in words: "60 problems, 4 samples per problem and the greedy decode"."""
    p, n, greedy = m["problems"], m["samples"], " and the greedy decode" if m["greedy"] else ""
    return f"{p} problem{'s' * (p != 1)}, {n} sample{'s' * (n != 1)} per problem{greedy}"


def smaller(new: dict, shown: dict | None) -> bool:
    """Whether an evaluation (`new`) measured less than the one a card shows: fewer problems, fewer samples per
    problem, or no greedy decode where it had one. Written into the folder the card's table cites, it replaced that
    table's records, so it is never smaller: the card follows its records."""
    if shown is None or new["records"] == shown.get("records"):
        return False
    return (
        new["problems"] < shown.get("problems", 0)
        or new["samples"] < shown.get("samples", 0)
        or (shown.get("greedy", False) and not new["greedy"])
    )


def card_after_eval(model, summary_md: str, summary: dict, records_dir) -> str | None:
    """After `rlvr eval` of a run's final model: its card's held-out section becomes this evaluation (each copy
    written atomically) when it measured what the card describes: the run's own task, task settings and reward terms,
    on problems it did not train on, and no less than the table the card shows (`smaller`). Returns the line saying
    what happened to the card; None when `model` is no run's final model."""
    import yaml

    final = final_of(model)
    if final is None:
        return None
    card, setup = final / CARD_FILE, summary["setup"]
    run = yaml.safe_load((final.parent / "config.yaml").read_text()) or {}
    task, terms = run.get("task", {}), run.get("reward", {}).get("terms")
    overlap = summary.get("hygiene", {}).get("contaminated", 0)
    new, shown = measure(summary, records_dir), heldout_measured(final)
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
        (
            smaller(new, shown),
            f"it shows a fuller evaluation ({measured_text(shown or new)}; records in {(shown or new)['records']}) "
            f"than this one ({measured_text(new)}); one with at least as many problems and samples per problem "
            "replaces it",
        ),
    ):
        if differs:
            return f"model card {card} left as it was: {why}"
    add_heldout(final, eval_section(summary_md, setup, records_dir), new)
    return f"model card {card} (and its copies in adapter/ and merged/) now shows this evaluation"


__all__ = ["final_of", "eval_section", "measure", "smaller", "card_after_eval"]
