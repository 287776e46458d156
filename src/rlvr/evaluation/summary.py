"""Summarise evaluation records per difficulty band and overall: pass@1 and pass@k with bootstrap
intervals over problems, greedy accuracy, and the verdict statuses reported apart (a parse failure
is not a wrong answer, and a model that stops answering should show up as such)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlvr.evaluation.lenient import has_lenient, per_problem_rates
from rlvr.evaluation.records import EvalRecord, atomic_write_text, by_problem
from rlvr.evaluation.stats import bootstrap_ci, mean_correct, pass_at_k
from rlvr.verifiers.base import STATUSES

OVERALL = "all"


def parse_metric(metric: str) -> tuple[str, int]:
    """'pass@4' -> ('sampled', 4); 'greedy' -> ('greedy', 1)."""
    if metric == "greedy":
        return "greedy", 1
    head, _, k = metric.partition("@")
    if head != "pass" or not k.isdigit() or int(k) < 1:
        raise ValueError(f"unknown metric {metric!r}; use 'pass@K' (K >= 1) or 'greedy'")
    return "sampled", int(k)


def per_problem_values(records: Sequence[EvalRecord], metric: str = "pass@1") -> dict[str, tuple[str, float]]:
    """{problem_id: (band, value)}: the per-problem number that bootstraps resample.

    pass@k uses the unbiased estimator over that problem's n samples (k <= n or ValueError);
    greedy is 1.0 or 0.0 from the single greedy decode.
    """
    mode, k = parse_metric(metric)
    out = {}
    for pid, (band, hits) in by_problem(records, mode).items():
        if mode == "greedy":
            out[pid] = (band, mean_correct(hits[:1]))
        elif k == 1:
            out[pid] = (band, mean_correct(hits))
        else:
            if k > len(hits):
                raise ValueError(f"{metric} needs at least {k} samples per problem; {pid!r} has {len(hits)}")
            out[pid] = (band, pass_at_k(len(hits), sum(hits), k))
    return out


def bands_in_order(records: Sequence[EvalRecord]) -> list[str]:
    """Band names in first-seen order (the order the task listed its problems in)."""
    return list(dict.fromkeys(r.band for r in records))


def interval(values: Sequence[float], n_boot: int, alpha: float, seed: int) -> dict:
    point, lo, hi = bootstrap_ci(values, n_boot=n_boot, alpha=alpha, seed=seed)
    return {"value": point, "lo": lo, "hi": hi}


def status_fractions(records: Sequence[EvalRecord]) -> dict[str, float]:
    """Fraction of records per verdict status, every status listed (zeros included) so that columns line up."""
    counts = Counter(r.status for r in records)
    total = max(1, len(records))
    return {s: counts.get(s, 0) / total for s in STATUSES}


def _block(records: Sequence[EvalRecord], ks: Sequence[int], n_boot: int, alpha: float, seed: int) -> dict:
    sampled = [r for r in records if r.mode == "sampled"]
    greedy = [r for r in records if r.mode == "greedy"]
    counts = [len(h) for _, h in by_problem(sampled).values()]
    block: dict[str, Any] = {
        "n_problems": len({r.problem_id for r in records}),
        "samples_per_problem": min(counts) if counts else 0,
        "pass@k": {},
        "greedy": None,
        "lenient": None,
        "status": status_fractions(sampled) if sampled else None,
        "greedy_status": status_fractions(greedy) if greedy else None,
    }
    if sampled:
        for k in ks:
            values = [v for _, v in per_problem_values(sampled, f"pass@{k}").values()]
            block["pass@k"][str(k)] = interval(values, n_boot, alpha, seed)
    if has_lenient(sampled):  # lenient pass@1: the final answer whatever the format (rlvr.evaluation.lenient)
        block["lenient"] = interval([le for _, _, le, _ in per_problem_rates(sampled).values()], n_boot, alpha, seed)
    if greedy:
        values = [v for _, v in per_problem_values(greedy, "greedy").values()]
        block["greedy"] = interval(values, n_boot, alpha, seed)
    return block


def summarize(
    records: Sequence[EvalRecord],
    ks: Sequence[int] = (1,),
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
    label: str = "",
) -> dict:
    """Per band and overall: {"label", "alpha", "ks", "bands": {band: block}, "overall": block}.

    block: n_problems, samples_per_problem (the smallest n seen), "pass@k": {"1": {value, lo, hi}, ...},
    "lenient": lenient pass@1 {value, lo, hi} (None without lenient statuses), "greedy": {value, lo, hi} or None, "status" / "greedy_status": {status: fraction}.
    pass@1 is always reported; a k larger than some problem's n raises ValueError.
    """
    if not records:
        raise ValueError("no evaluation records to summarise")
    # pass@1 always, unless there are no sampled completions at all (greedy only)
    ks = sorted({1, *ks}) if any(r.mode == "sampled" for r in records) else []
    return {
        "label": label,
        "alpha": alpha,
        "ks": ks,
        "bands": {
            b: _block([r for r in records if r.band == b], ks, n_boot, alpha, seed) for b in bands_in_order(records)
        },
        "overall": _block(records, ks, n_boot, alpha, seed),
    }


def fmt_interval(cell: dict | None) -> str:
    """{value, lo, hi} -> '0.420 [0.310, 0.530]'; None -> '-'."""
    if cell is None:
        return "-"
    return f"{cell['value']:.3f} [{cell['lo']:.3f}, {cell['hi']:.3f}]"


def summary_markdown(summary: dict) -> str:
    """Two tables: accuracy per band (with CIs), then sampled verdict statuses per band."""
    ks, pct = summary["ks"], round(100 * (1 - summary["alpha"]))
    # a task without bands has the one band "all" (rlvr.tasks.jsonl): it is the overall row, shown once
    bands = [] if list(summary["bands"]) == [OVERALL] else list(summary["bands"].items())
    rows = [*bands, (f"**{OVERALL}**", summary["overall"])]
    lenient = summary["overall"].get("lenient") is not None
    head = ["band", "problems", "n"] + [f"pass@{k} [{pct}% CI]" for k in ks] + ["lenient pass@1"] * lenient + ["greedy"]
    lines = [
        f"### {summary['label']}" if summary["label"] else "",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for band, b in rows:
        cells = [band, str(b["n_problems"]), str(b["samples_per_problem"])]
        cells += [fmt_interval(b["pass@k"].get(str(k))) for k in ks]
        cells += [fmt_interval(b.get("lenient"))] * lenient + [fmt_interval(b["greedy"])]
        lines.append("| " + " | ".join(cells) + " |")
    which = "status" if summary["overall"]["status"] else "greedy_status"  # greedy only: the greedy ones
    lines += [
        "",
        f"Verdict statuses of the {'sampled' if which == 'status' else 'greedy'} completions (fractions):",
        "",
        "| band | " + " | ".join(STATUSES) + " |",
        "|" + "---|" * (len(STATUSES) + 1),
    ]
    for band, b in rows:
        fr = b[which] or {}
        lines.append(f"| {band} | " + " | ".join(f"{fr.get(s, 0.0):.3f}" for s in STATUSES) + " |")
    lines.append(
        f"\nIntervals: percentile bootstrap over problems ({pct}%)."
        + (
            " pass@k is strict (the task's answer format); lenient pass@1 takes the final number or expression "
            "whatever the format, graded by the same verifier."
            if lenient
            else ""
        )
    )
    demo = (summary.get("setup") or {}).get("demo")
    if demo:  # demo "auto", measured on this model before it was evaluated
        from rlvr.evaluation.demo_choice import choice_markdown

        lines.append("\n" + choice_markdown(demo))
    return "\n".join(lines).lstrip("\n") + "\n"


def write_summary(summary: dict, out_dir: str | Path, name: str = "eval") -> tuple[Path, Path]:
    """out_dir/NAME.json and out_dir/NAME.md, each written atomically."""
    out_dir = Path(out_dir)
    j = atomic_write_text(out_dir / f"{name}.json", json.dumps(summary, indent=2) + "\n")
    m = atomic_write_text(out_dir / f"{name}.md", summary_markdown(summary))
    return j, m
