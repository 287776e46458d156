"""Strict and lenient side by side: how much of a gain is the model learning the answer format, how much answers.

Strict scoring is the task's own: the answer must sit in `\\boxed{}` (or an answer tag), under the hedging rules.
Lenient scoring takes the completion's final number or expression whatever the format
(rlvr.verifiers.extract.last_answer: the last one only, so a hedge cannot slip in), writes it in the task's answer
format and grades it with the same reward (the same verifier and answer form). A completion right under strict
scoring is right under lenient scoring too; so every sampled completion is one of

    strict-right | format-only (lenient-right, strict-wrong) | lenient-wrong

and, per problem, strict pass@1 = lenient pass@1 - format-only share. A model's strict gain over a baseline
therefore splits exactly in two, each per problem and so with a paired bootstrap interval over problems:

    answers learned = lenient(model) - lenient(baseline)          lenient-wrong -> right
    format learned  = format_only(baseline) - format_only(model)  lenient-right & strict-wrong -> strict-right
    strict gain     = answers learned + format learned
"""

from __future__ import annotations

from collections.abc import Sequence

from rlvr.evaluation.records import EvalRecord, by_problem
from rlvr.evaluation.stats import fmt_diff, paired_bootstrap, paired_verdict
from rlvr.tasks.answer_formats import ANSWER_FORMATS
from rlvr.verifiers.extract import last_answer

OVERALL = "all"
PARTS = ("format", "answers")


def in_answer_format(answer: str, answer_format: str) -> str:
    """A bare answer written the way the task asks for it: `\\boxed{a}` or `<answer>a</answer>`."""
    return ANSWER_FORMATS.get(answer_format).write(answer)


def lenient_statuses(
    reward, completions: Sequence[str], problems: Sequence, strict: Sequence[str], answer_format: str = "boxed"
) -> list[str | None]:
    """(B,) lenient verdict statuses: "correct" where strict already is, else the last answer's status under the
    same reward (its first term's verdict), "no_answer" where the text has none; None for a problem with no
    answer to find (a code task's). One reward call over the rows that need it."""
    out: list[str | None] = [None] * len(completions)
    todo, texts = [], []
    for i, (text, problem, status) in enumerate(zip(completions, problems, strict)):
        if getattr(problem, "answer", None) is None:
            continue
        if status == "correct":
            out[i] = "correct"
            continue
        answer = last_answer(text)
        if answer is None:
            out[i] = "no_answer"
            continue
        todo.append(i)
        texts.append(in_answer_format(answer, answer_format))
    if todo:
        verdicts = reward(texts, [problems[i] for i in todo]).verdicts
        for i, v in zip(todo, verdicts):
            out[i] = v.status
    return out


def has_lenient(records: Sequence[EvalRecord]) -> bool:
    """True when every sampled record carries a lenient status (evaluations before lenient scoring do not)."""
    sampled = [r for r in records if r.mode == "sampled"]
    return bool(sampled) and all(r.lenient is not None for r in sampled)


def per_problem_rates(records: Sequence[EvalRecord]) -> dict[str, tuple[str, float, float, float]]:
    """{problem_id: (band, strict pass@1, lenient pass@1, format-only share)} over the sampled records."""
    by_problem(records)  # the same checks: no repeated sample, no problem in two bands
    rows: dict[str, list] = {}
    for r in records:
        if r.mode != "sampled":
            continue
        band, strict, lenient, n = rows.setdefault(r.problem_id, [r.band, 0, 0, 0])
        rows[r.problem_id] = [band, strict + r.correct, lenient + (r.lenient == "correct"), n + 1]
    return {pid: (band, s / n, le / n, (le - s) / n) for pid, (band, s, le, n) in rows.items()}


def _paired(a: list[float], b: list[float], n_boot: int, alpha: float, seed: int) -> dict:
    diff, lo, hi = paired_bootstrap(a, b, n_boot=n_boot, alpha=alpha, seed=seed)
    return {"diff": diff, "lo": lo, "hi": hi, "verdict": paired_verdict(lo, hi)}


def gain_split(
    evals: dict[str, Sequence[EvalRecord]], baseline: str, n_boot: int = 2000, alpha: float = 0.05, seed: int = 0
) -> dict | None:
    """{model: {band: {"format": {diff, lo, hi, verdict}, "answers": {...}}}} for every model but the baseline,
    bands in the baseline's order then "all"; None when some evaluation has no lenient statuses. The models must
    cover the same problems (rlvr.evaluation.compare checks that first)."""
    if not all(has_lenient(recs) for recs in evals.values()):
        return None
    rates = {name: per_problem_rates(recs) for name, recs in evals.items()}
    base = rates[baseline]
    bands = list(dict.fromkeys(band for band, *_ in base.values())) + [OVERALL]
    out: dict[str, dict] = {}
    for name, per in rates.items():
        if name == baseline:
            continue
        out[name] = {}
        for band in bands:
            pids = [p for p in base if band == OVERALL or base[p][0] == band]
            out[name][band] = {
                "format": _paired([base[p][3] for p in pids], [per[p][3] for p in pids], n_boot, alpha, seed),
                "answers": _paired([per[p][2] for p in pids], [base[p][2] for p in pids], n_boot, alpha, seed),
            }
    return out


def split_markdown(split: dict, baseline: str, pct: int = 95) -> str:
    """One row per band and model: the strict gain's two parts with their paired intervals."""
    lines = [
        f"Gain over {baseline} split in two (they add up to the strict pass@1 difference; lenient scoring takes "
        f"the final number or expression whatever the format, graded by the same verifier; {pct}% paired "
        f"bootstrap over problems):",
        "",
        "| band | model | format learned [CI] | answers learned [CI] |",
        "|---|---|---|---|",
    ]
    bands = list(next(iter(split.values()))) if split else []
    for band in bands:
        for model, per in split.items():
            cells = [f"{fmt_diff(d)} {d['verdict']}" for d in (per[band]["format"], per[band]["answers"])]
            lines.append(f"| {band} | {model} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


__all__ = ["in_answer_format", "lenient_statuses", "has_lenient", "per_problem_rates", "gain_split", "split_markdown"]
