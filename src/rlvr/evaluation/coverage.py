"""Coverage side by side: pass@k at every k the samples allow, each model against the baseline, paired.

pass@1 says how often one sample is right; pass@k for large k says what the model can reach at all. Training that
only sharpens the distribution onto answers the start model could already sample raises pass@1 and leaves pass@n
where it was (or lowers it); training that teaches something new raises both. The plot of pass@k against k shows
the shape; this table says, at each k, whether the gap is outside the noise (paired bootstrap over problems, the
per-problem pass@k from the unbiased estimator, rlvr.evaluation.stats).
"""

from __future__ import annotations

from collections.abc import Sequence

from rlvr.evaluation.records import EvalRecord, by_problem
from rlvr.evaluation.stats import coverage_ks, fmt_diff, paired_bootstrap, paired_verdict
from rlvr.evaluation.summary import fmt_interval, interval, per_problem_values


def coverage(
    evals: dict[str, Sequence[EvalRecord]], baseline: str, n_boot: int = 2000, alpha: float = 0.05, seed: int = 0
) -> dict | None:
    """{"ks": [1, 2, 4, ..., n], "accuracy": {model: {k: {value, lo, hi}}}, "diffs": {model: {k: {diff, lo, hi,
    verdict}}}, "bands": {band: {model: {k: {diff, lo, hi, verdict}}}}} or None when a problem has fewer than 2
    samples (no curve to draw). accuracy and diffs are over all problems; bands holds each band's paired difference
    at k = 1 and k = n only, when there is more than one band (an overall "no gain at pass@n" can hide one band
    that gained and one that lost). The models must cover the same problems with the same n
    (rlvr.evaluation.compare checks that first)."""
    counts = {len(hits) for _, hits in by_problem(evals[baseline]).values()}
    if not counts or min(counts) < 2:
        return None
    ks = coverage_ks(min(counts))
    values = {m: {k: per_problem_values(recs, f"pass@{k}") for k in ks} for m, recs in evals.items()}
    pids = list(values[baseline][1])
    column = lambda m, k: [values[m][k][p][1] for p in pids]  # noqa: E731
    band_of = {p: values[baseline][1][p][0] for p in pids}
    bands = list(dict.fromkeys(band_of.values()))

    def paired(m: str, k: int, band: str | None = None) -> dict:
        rows = [i for i, p in enumerate(pids) if band is None or band_of[p] == band]
        a, b = column(m, k), column(baseline, k)
        diff, lo, hi = paired_bootstrap(
            [a[i] for i in rows], [b[i] for i in rows], n_boot=n_boot, alpha=alpha, seed=seed
        )
        return {"diff": diff, "lo": lo, "hi": hi, "verdict": paired_verdict(lo, hi)}

    others = [m for m in evals if m != baseline]
    return {
        "ks": ks,
        "accuracy": {m: {k: interval(column(m, k), n_boot, alpha, seed) for k in ks} for m in evals},
        "diffs": {m: {k: paired(m, k) for k in ks} for m in others},
        "bands": {b: {m: {k: paired(m, k, b) for k in (ks[0], ks[-1])} for m in others} for b in bands}
        if len(bands) > 1
        else {},
    }


def coverage_markdown(cov: dict, baseline: str, pct: int) -> str:
    """One row per k: each model's pass@k with its interval, then each model minus the baseline with a verdict."""
    models, others = list(cov["accuracy"]), list(cov["diffs"])
    lines = [
        f"Coverage: pass@k over all problems against k, {pct}% bootstrap intervals; each model minus {baseline} "
        "paired over problems. A gain at k = 1 that vanishes at the largest k narrows what the model samples "
        "rather than widening what it can reach.",
        "",
        "| k | " + " | ".join(models) + "".join(f" | {m} - {baseline}" for m in others) + " |",
        "|" + "---|" * (1 + len(models) + len(others)),
    ]
    for k in cov["ks"]:
        cells = [fmt_interval(cov["accuracy"][m][k]) for m in models]
        for m in others:
            d = cov["diffs"][m][k]
            cells.append(f"{fmt_diff(d)} {d['verdict']}")
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n" + _bands_markdown(cov, baseline)


def _bands_markdown(cov: dict, baseline: str) -> str:
    """Per band, each model minus the baseline at k = 1 and at the largest k: where the overall curve hides bands
    that moved in opposite directions."""
    if not cov.get("bands"):
        return ""
    first, last = cov["ks"][0], cov["ks"][-1]
    lines = [
        "",
        f"Per band, each model minus {baseline} at k = {first} and k = {last} (paired over the band's problems):",
        "",
        f"| band | model | pass@{first} - {baseline} | pass@{last} - {baseline} |",
        "|---|---|---|---|",
    ]
    for band, models in cov["bands"].items():
        for m, at in models.items():
            lines.append(
                f"| {band} | {m} | " + " | ".join(f"{fmt_diff(at[k])} {at[k]['verdict']}" for k in (first, last)) + " |"
            )
    return "\n".join(lines) + "\n"


def as_summaries(cov: dict) -> dict[str, dict]:
    """The table in the shape rlvr.evaluation.report.pass_at_k_plot reads ({model: {"overall": {"pass@k": ...}}})."""
    return {m: {"overall": {"pass@k": dict(cells)}} for m, cells in cov["accuracy"].items()}


__all__ = ["coverage", "coverage_markdown", "as_summaries"]
