"""Models side by side on the same problems: accuracy per band with intervals, paired differences
against a baseline, and a plain verdict per band ("better", "worse", "inside the noise").

Every model must have been evaluated on the same problems with the same number of samples per
problem: a paired difference is only meaningful problem by problem, so a mismatch is an error, not
something to average over. Intervals are per cell and not corrected for the number of cells compared.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlvr.evaluation.coverage import coverage, coverage_markdown
from rlvr.evaluation.lenient import gain_split, split_markdown
from rlvr.evaluation.records import EvalRecord, atomic_write_text, by_problem
from rlvr.evaluation.stats import fmt_diff, paired_bootstrap, paired_verdict
from rlvr.evaluation.summary import OVERALL, fmt_interval, interval, parse_metric, per_problem_values


def _aligned(evals: dict[str, Sequence[EvalRecord]], baseline: str, metric: str):
    """{model: {pid: (band, value)}} after checking all models cover the baseline's problems and n."""
    if baseline not in evals:
        raise ValueError(f"baseline {baseline!r} is not among the models: {', '.join(evals)}")
    mode, _ = parse_metric(metric)
    values = {name: per_problem_values(recs, metric) for name, recs in evals.items()}
    counts = {name: {pid: len(h) for pid, (_, h) in by_problem(recs, mode).items()} for name, recs in evals.items()}
    ref = values[baseline]
    if not ref:
        raise ValueError(f"baseline {baseline!r} has no {mode} records")
    for name, vals in values.items():
        missing, extra = ref.keys() - vals.keys(), vals.keys() - ref.keys()
        if missing or extra:
            raise ValueError(
                f"{name!r} and {baseline!r} were not evaluated on the same problems "
                f"({len(missing)} missing, {len(extra)} extra, e.g. {sorted(missing | extra)[:3]})"
            )
        if counts[name] != counts[baseline]:
            raise ValueError(f"{name!r} and {baseline!r} differ in samples per problem; compare like with like")
        moved = [pid for pid in ref if vals[pid][0] != ref[pid][0]]
        if moved:
            raise ValueError(f"{name!r} puts problems in other bands than {baseline!r}, e.g. {moved[:3]}")
    return values


def compare(
    evals: dict[str, Sequence[EvalRecord]],
    baseline: str,
    metric: str = "pass@1",
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> dict:
    """{"metric", "alpha", "baseline", "models", "bands",
        "accuracy": {model: {band: {value, lo, hi}}},
        "diffs": {model: {band: {diff, lo, hi, verdict}}},  (diffs: model minus baseline, others only)
        "split": {model: {band: {"format": {...}, "answers": {...}}}} or None,  (pass@1 with lenient statuses:
        the strict gain as format learned + answers learned, rlvr.evaluation.lenient)
        "coverage": {"ks", "accuracy", "diffs"} or None}  (pass@1 with n >= 2 samples: pass@k at k = 1, 2, 4, ..., n
        over all problems, paired against the baseline, rlvr.evaluation.coverage)

    bands lists the baseline's bands in first-seen order, then "all". The same seed resamples the
    same problem indices for every model, so their intervals are comparable too.
    """
    values = _aligned(evals, baseline, metric)
    pids = list(values[baseline])
    # a task without bands has the one band "all": it is the overall one, listed once
    bands = list(dict.fromkeys([*(values[baseline][pid][0] for pid in pids), OVERALL]))
    members = {b: [pid for pid in pids if b == OVERALL or values[baseline][pid][0] == b] for b in bands}
    result: dict[str, Any] = {
        "metric": metric,
        "alpha": alpha,
        "baseline": baseline,
        "models": list(evals),
        "bands": bands,
        "accuracy": {},
        "diffs": {},
    }
    for name, vals in values.items():
        result["accuracy"][name] = {b: interval([vals[p][1] for p in members[b]], n_boot, alpha, seed) for b in bands}
        if name == baseline:
            continue
        result["diffs"][name] = {}
        for b in bands:
            diff, lo, hi = paired_bootstrap(
                [vals[p][1] for p in members[b]],
                [values[baseline][p][1] for p in members[b]],
                n_boot=n_boot,
                alpha=alpha,
                seed=seed,
            )
            result["diffs"][name][b] = {
                "diff": diff,
                "lo": lo,
                "hi": hi,
                "verdict": paired_verdict(lo, hi),
                "n_problems": len(members[b]),
            }
    result["split"] = gain_split(evals, baseline, n_boot, alpha, seed) if metric == "pass@1" else None
    result["coverage"] = coverage(evals, baseline, n_boot, alpha, seed) if metric == "pass@1" else None
    return result


def compare_markdown(result: dict) -> str:
    """Accuracy table (model columns), then one row per band and model of the paired difference."""
    pct, models, base = round(100 * (1 - result["alpha"])), result["models"], result["baseline"]
    lines = [
        f"{result['metric']} per band, {pct}% bootstrap intervals over problems.",
        "",
        "| band | " + " | ".join(models) + " |",
        "|" + "---|" * (len(models) + 1),
    ]
    for b in result["bands"]:
        lines.append(f"| {b} | " + " | ".join(fmt_interval(result["accuracy"][m][b]) for m in models) + " |")
    lines += [
        "",
        f"Paired differences against {base} (same problems, paired bootstrap):",
        "",
        "| band | model | difference [CI] | verdict |",
        "|---|---|---|---|",
    ]
    for b in result["bands"]:
        for m, per_band in result["diffs"].items():
            d = per_band[b]
            lines.append(f"| {b} | {m} | {fmt_diff(d)} | {d['verdict']} |")
    if result.get("split"):
        lines += ["", split_markdown(result["split"], base, pct).rstrip("\n")]
    if result.get("coverage") and result["diffs"]:
        lines += ["", coverage_markdown(result["coverage"], base, pct).rstrip("\n")]
    return "\n".join(lines) + "\n"


def head_to_head(evals: dict[str, Sequence[EvalRecord]], model: str, baseline: str, seed: int = 0) -> list[dict]:
    """`model` against `baseline` alone, by each metric both have: pass@1, and the greedy decode where it was run.
    One `compare` result per metric (the same bootstrap seed), so each difference is paired over the same problems."""
    pair = {baseline: evals[baseline], model: evals[model]}
    metrics = ["pass@1"] + (["greedy"] if all(any(r.mode == "greedy" for r in recs) for recs in pair.values()) else [])
    return [compare(pair, baseline=baseline, metric=m, seed=seed) for m in metrics]


def head_to_head_markdown(results: list[dict]) -> str:
    """Per band and metric: the baseline's and the model's figure and their paired difference with its verdict."""
    base = results[0]["baseline"]
    model = next(m for m in results[0]["models"] if m != base)
    pct = round(100 * (1 - results[0]["alpha"]))
    lines = [
        f"{model} minus {base} on the same held-out problems, paired bootstrap ({pct}% intervals):",
        "",
        f"| band | metric | {base} | {model} | {model} - {base} [CI] | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for b in results[0]["bands"]:
        for r in results:
            d = r["diffs"][model][b]
            lines.append(
                f"| {b} | {r['metric']} | {r['accuracy'][base][b]['value']:.3f} | {r['accuracy'][model][b]['value']:.3f}"
                f" | {fmt_diff(d)} | {d['verdict']} |"
            )
    return "\n".join(lines) + "\n"


def compare_plot(result: dict, path: str | Path) -> Path:
    """Grouped bars: accuracy per band per model, with the interval as an error bar. Written atomically."""
    import matplotlib

    matplotlib.use("Agg")  # no display on a server; must precede pyplot
    import matplotlib.pyplot as plt
    import numpy as np

    bands, models = result["bands"], result["models"]
    width = 0.8 / len(models)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(bands) * max(1, len(models)) / 2 + 2), 3.8))
    for i, m in enumerate(models):
        cells = [result["accuracy"][m][b] for b in bands]
        vals = np.array([c["value"] for c in cells])
        err = np.array([[c["value"] - c["lo"] for c in cells], [c["hi"] - c["value"] for c in cells]])
        x = np.arange(len(bands)) + (i - (len(models) - 1) / 2) * width
        ax.bar(x, vals, width, yerr=err, capsize=3, label=m)
    ax.set_xticks(np.arange(len(bands)), bands)
    ax.set_ylim(0, 1.18)  # headroom so the legend row never covers a bar at 1.0
    ax.set_ylabel(result["metric"])
    ax.set_title(f"{result['metric']} per band ({round(100 * (1 - result['alpha']))}% CI)")
    ax.legend(fontsize="small", loc="upper center", ncol=len(models), frameon=False)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)
    return path


def write_comparison(result: dict, out_dir: str | Path, name: str = "compare") -> dict[str, Path]:
    """NAME.json, NAME.md and NAME.png in out_dir."""
    out_dir = Path(out_dir)
    return {
        "json": atomic_write_text(out_dir / f"{name}.json", json.dumps(result, indent=2) + "\n"),
        "md": atomic_write_text(out_dir / f"{name}.md", compare_markdown(result)),
        "png": compare_plot(result, out_dir / f"{name}.png"),
    }
