"""The run report: report.md with what was run, the comparison table, plots, and example completions.

Everything here reads files a run already wrote (metrics.jsonl, eval records and summaries, the comparison),
so a report can be rebuilt from a run directory at any time, and its numbers are the files' numbers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from rlvr.rundir.files import atomic_write_text

VERDICT_COLORS = {
    "correct": "#2a9d8f",
    "wrong": "#e76f51",
    "no_answer": "#8d99ae",
    "multiple_answers": "#f4a261",
    "timeout": "#6d597a",
    "invalid_gold": "#b5838d",
    "error": "#264653",
}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # no display on a server; must precede pyplot
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    _pyplot().close(fig)
    tmp.replace(path)
    return path


def _series(rows: list[dict], key: str) -> tuple[list[int], list[float]]:
    pts = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
    return [p[0] for p in pts], [p[1] for p in pts]


def _smooth(values: list[float], k: int = 5) -> list[float]:
    out = []
    for i in range(len(values)):
        window = values[max(0, i - k + 1) : i + 1]
        out.append(sum(window) / len(window))
    return out


def training_plot(rows: list[dict], path: Path, title: str = "RLVR training") -> Path:
    """2x2: reward and validation accuracy; nonzero-variance fraction; verdict fractions; completion length."""
    plt = _pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    ax = axes[0][0]
    x, y = _series(rows, "reward/mean")
    ax.plot(x, y, color="#bbbbbb", lw=1, label="reward (per step)")
    ax.plot(x, _smooth(y), color="#1d3557", lw=2, label="reward (5-step mean)")
    vx, vy = _series(rows, "val/accuracy")
    if vx:
        ax.plot(vx, vy, "o-", color="#e63946", lw=2, label="validation accuracy (greedy)")
    ax.set_title("training reward vs validation accuracy")
    ax.set_xlabel("step")
    ax.legend(fontsize="small")
    ax = axes[0][1]
    x, y = _series(rows, "groups/nonzero_var_frac")
    ax.plot(x, y, color="#bbbbbb", lw=1)
    ax.plot(x, _smooth(y), color="#457b9d", lw=2)
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("groups with nonzero reward variance (the gradient signal)")
    ax.set_xlabel("step")
    ax = axes[1][0]
    statuses = [s for s in VERDICT_COLORS if any((r.get(f"verdict/{s}_frac") or 0) > 0 for r in rows)]
    steps = [r["step"] for r in rows]
    stacks = [_smooth([r.get(f"verdict/{s}_frac") or 0.0 for r in rows]) for s in statuses]
    if statuses:
        ax.stackplot(steps, *stacks, labels=statuses, colors=[VERDICT_COLORS[s] for s in statuses], alpha=0.9)
    ax.set_ylim(0, 1)
    ax.set_title("verdicts of sampled completions (parse failures apart)")
    ax.set_xlabel("step")
    ax.legend(fontsize="small", loc="lower left")
    ax = axes[1][1]
    x, y = _series(rows, "len/mean")
    ax.plot(x, _smooth(y), color="#6a4c93", lw=2, label="mean length (tokens)")
    x2, y2 = _series(rows, "len/truncated_frac")
    twin = ax.twinx()
    twin.plot(x2, _smooth(y2), color="#ffb703", lw=1.5, label="truncated fraction")
    twin.set_ylim(0, 1)
    ax.set_title("completion length")
    ax.set_xlabel("step")
    ax.legend(fontsize="small", loc="upper left")
    twin.legend(fontsize="small", loc="upper right")
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, Path(path))


MISMATCH_KEYS = (
    ("mismatch/k3_kl", "k3 KL(sampler || trainer)"),
    ("mismatch/abs_log_ratio", "mean |log ratio|"),
    ("mismatch/max_ratio", "max ratio pi_train / pi_sampler"),
    ("mismatch/outside_frac", "tokens with ratio outside [1/C, C]"),
)


def panels_plot(rows: list[dict], path: Path, keys, title: str, color: str) -> Path | None:
    """One panel per (metric, label) in `keys` over the steps, raw and smoothed; None when no step has the first."""
    if not any(keys[0][0] in r for r in rows):
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(keys), figsize=(3.5 * len(keys), 3.2))
    for ax, (key, label) in zip(axes, keys):
        x, y = _series(rows, key)
        ax.plot(x, y, color="#bbbbbb", lw=1)
        ax.plot(x, _smooth(y), color=color, lw=2)
        ax.set_title(label, fontsize="small")
        ax.set_xlabel("step")
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, Path(path))


# A run whose sampler and trainer disagree by more than this k3 KL, averaged over its steps, is warned about. Healthy
# bf16 runs measured 0.001-0.006 (docs/performance.md: the default preset's whole runs, the last steps the highest);
# the update that hid the environment's ids from later turns measured 0.15-0.39 (docs/log/2026-12-02.md, "Tool use").
MISMATCH_WARN_K3 = 0.05


def mismatch_warning(rows: list[dict], limit: float = MISMATCH_WARN_K3) -> str | None:
    """One plain sentence when the sampler-vs-trainer k3 KL averaged over the steps that measured it is above
    `limit`: the update then scores different tokens, or the same tokens in another context, than the sampler drew
    (a chat template re-rendered, a mask used as attention, another model's weights), and its gradient is for a
    policy that did not sample them. None otherwise, and for a run that measured no step."""
    values = [r["mismatch/k3_kl"] for r in rows if r.get("mismatch/k3_kl") is not None]
    if not values:
        return None
    mean = sum(values) / len(values)
    if mean <= limit:
        return None
    return (
        f"The sampler and the trainer disagree on the trained tokens: k3 KL(sampler || trainer) averaged {mean:.3g} "
        f"over {len(values)} steps (at most {max(values):.3g}), where a healthy bf16 run measures 0.001-0.006 "
        f"(warned above {limit:g}). The update is then not training the policy that sampled; look for ids the "
        "sampler did not produce or saw in another context (see the mismatch plot below)."
    )


# Above this share of the advantage from groups where only shaping varied (mean over the steps), the report warns:
# a quarter of every update teaching the format rather than the answers
SHAPING_WARN_SHARE = 0.25


def shaping_warning(rows: list[dict], limit: float = SHAPING_WARN_SHARE) -> str | None:
    """One plain sentence when groups whose correctness term was the same on every sample (none solved, or all) and
    whose rewards differed only by shaping carried more than `limit` of the advantage, averaged over the steps
    (`adv/shaping_only_share`, rlvr.training.metrics.shaping_figures). None otherwise, and for a run without it."""
    values = [r["adv/shaping_only_share"] for r in rows if r.get("adv/shaping_only_share") is not None]
    if not values or sum(values) / len(values) <= limit:
        return None
    frac = [r["groups/shaping_only_frac"] for r in rows if r.get("groups/shaping_only_frac") is not None]
    return (
        f"{sum(values) / len(values):.0%} of the advantage (mean over {len(values)} steps) came from groups where no "
        f"sample was solved, or every one was, and only shaping varied ({sum(frac) / len(frac):.0%} of the groups): "
        "divided by its own small std, a format term there pushes as hard as correctness does elsewhere, and the "
        "update teaches the format, often reinforcing wrong answers that are well formed. algorithm.adv_scale: batch "
        "(one std for the step) keeps the terms' proportions; a smaller or no format term removes the push."
    )


def mismatch_plot(rows: list[dict], path: Path, title: str = "sampler vs trainer, per step") -> Path | None:
    """One panel per mismatch figure (rlvr.algorithms.mismatch) over the steps; None when no step has them."""
    return panels_plot(rows, path, MISMATCH_KEYS, title, "#9d0208")


EPISODE_KEYS = (
    ("episode/tool_use_frac", "episodes that call a tool"),
    ("episode/tool_calls", "tool calls per episode"),
    ("episode/tool_error_frac", "calls that failed (any reason)"),
    ("episode/turns", "policy turns per episode"),
)


def episode_plot(rows: list[dict], path: Path, title: str = "tool use over training, per step") -> Path | None:
    """Tool use over the steps of an episode run (episode/*); None for a single-turn run."""
    return panels_plot(rows, path, EPISODE_KEYS, title, "#3a86ff")


def pass_at_k_plot(
    summaries: dict[str, dict], path: Path, title: str = "coverage: held-out pass@k against k"
) -> Path | None:
    """pass@k (overall, with its interval over problems) against k on a log2 axis, one line per model: does
    training raise what k samples can reach, or only pass@1? None when no summary has more than one k."""
    curves = {m: sorted((int(k), c) for k, c in s["overall"]["pass@k"].items()) for m, s in summaries.items()}
    if not any(len(c) > 1 for c in curves.values()):
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for model, points in curves.items():
        ks = [k for k, _ in points]
        ax.plot(ks, [c["value"] for _, c in points], "o-", lw=2, label=model)
        ax.fill_between(ks, [c["lo"] for _, c in points], [c["hi"] for _, c in points], alpha=0.15)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("k (samples per problem)")
    ax.set_ylabel("pass@k (95% CI over problems)")
    ax.set_ylim(0, 1.02)
    ax.set_title(title)
    ax.legend(fontsize="small")
    fig.tight_layout()
    return _save(fig, Path(path))


def curves_plot(runs: dict[str, list[dict]], path: Path, title: str = "RLVR and its controls, per step") -> Path:
    """Two panels, one line per run: the true accuracy of its sampled completions (verdict/correct_frac, the real
    verifier's whatever the run was paid) and the reward it was paid (reward/mean), each a 5-step mean."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, key, label in (
        (axes[0], "verdict/correct_frac", "correct fraction of sampled completions (real verifier)"),
        (axes[1], "reward/mean", "reward paid (5-step mean)"),
    ):
        for name, rows in runs.items():
            x, y = _series(rows, key)
            ax.plot(x, _smooth(y), lw=2, label=name)
        ax.set_title(label, fontsize="small")
        ax.set_xlabel("step")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, Path(path))


def example_pairs(before: list, after: list, k: int = 10) -> list[tuple]:
    """k held-out problems with the first sampled completion of each model; problems whose verdict changed
    come first (they show what training did), then the rest, in a fixed order."""
    first = lambda recs: {r.problem_id: r for r in recs if r.mode == "sampled" and r.sample_idx == 0}  # noqa: E731
    a, b = first(before), first(after)
    common = [pid for pid in a if pid in b]
    changed = [p for p in common if a[p].status != b[p].status]
    same = [p for p in common if a[p].status == b[p].status]
    return [(a[p], b[p]) for p in (changed + same)[:k]]


def _quote(text: str, limit: int = 400) -> str:
    text = text.strip()
    text = text if len(text) <= limit else text[:limit] + " [...]"
    return "\n".join("    " + line for line in text.splitlines()) or "    (empty)"


def examples_markdown(pairs: list[tuple], prompts: dict[str, str], names=("start", "rlvr")) -> str:
    lines = []
    for i, (a, b) in enumerate(pairs, 1):
        lines += [
            f"**{i}. [{a.band}] {prompts.get(a.problem_id, a.problem_id)}**",
            "",
            f"{names[0]}: `{a.status}` (extracted: `{a.extracted}`)",
            "",
            _quote(a.completion),
            "",
            f"{names[1]}: `{b.status}` (extracted: `{b.extracted}`)",
            "",
            _quote(b.completion),
            "",
        ]
    return "\n".join(lines)


def versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {}
    for pkg in ("rlvr", "torch", "transformers", "peft", "math-verify"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def write_report(
    root: Path,
    *,
    meta: dict,
    compare_md: str,
    summaries_md: dict[str, str],
    plots: dict[str, Path],
    examples_md: str,
    reading: str = "",
    out_of_domain_md: str = "",
    warnings: Sequence[str | None] = (),
    sections: dict[str, str] | None = None,
) -> Path:
    """root/report.md; plots are linked by path relative to root. `warnings` come first, right under the title
    (a contended run, say); `sections` ({heading: markdown}) follow the held-out comparison."""
    root = Path(root)
    lines = ["# rlvr run report", "", *warning_lines(warnings)]
    lines += ["## What was run", ""]
    lines += [f"- **{k}**: {v}" for k, v in meta.items()]
    lines += ["", "## Held-out comparison", "", compare_md, ""]
    if reading:
        lines += ["**Reading.** " + reading, ""]
    for heading, md in (sections or {}).items():
        lines += [f"## {heading}", "", md.strip(), ""]
    if out_of_domain_md:
        lines += ["## Out of domain", "", out_of_domain_md, ""]
    lines += ["## Plots", "", *plot_lines(root, plots)]
    lines += ["## Evaluations per model", ""]
    for name, md in summaries_md.items():  # an evaluation summary carries its own heading when it has a label
        lines += ([] if md.lstrip().startswith("#") else [f"### {name}", ""]) + [md.strip(), ""]
    lines += ["## Ten held-out examples, before and after", "", examples_md]
    path = root / "report.md"
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path


def warning_lines(warnings) -> list[str]:
    """A report's warnings as Markdown quotes, right under its title (a None or empty one is left out)."""
    return [f"> **Warning.** {w}\n" for w in warnings if w]


def plot_lines(root: Path, plots: dict[str, Path]) -> list[str]:
    """One subsection per plot, linked by its path relative to the report's folder."""
    lines = []
    for title, path in plots.items():
        lines += [f"### {title}", "", f"![{title}]({Path(path).relative_to(root)})", ""]
    return lines


def read_metrics(run_dir: Path) -> list[dict]:
    path = Path(run_dir) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def heldout_tables(summaries: dict[str, dict], result: dict) -> dict[str, list[dict]]:
    """The held-out results as table rows for the trackers: per model and band (pass@k and greedy with their
    intervals, sampled verdict fractions), and each model's paired difference from the baseline per band."""
    per_band = []
    for model, summary in summaries.items():
        for band, b in [*summary["bands"].items(), ("all", summary["overall"])]:
            row = {"model": model, "band": band, "problems": b["n_problems"], "n": b["samples_per_problem"]}
            cells = {f"pass@{k}": cell for k, cell in b["pass@k"].items()}
            cells.update({"greedy": b["greedy"]} if b["greedy"] else {})
            cells.update({"lenient pass@1": b["lenient"]} if b.get("lenient") else {})
            for name, cell in cells.items():
                row.update({name: cell["value"], f"{name} lo": cell["lo"], f"{name} hi": cell["hi"]})
            row.update({f"{status} frac": v for status, v in (b["status"] or {}).items()})
            per_band.append(row)
    diffs = [
        {
            "model": model,
            "band": band,
            "baseline": result["baseline"],
            "metric": result["metric"],
            "difference": d["diff"],
            "lo": d["lo"],
            "hi": d["hi"],
            "verdict": d["verdict"],
            "problems": d["n_problems"],
        }
        for model, per in result["diffs"].items()
        for band, d in per.items()
    ]
    return {"heldout/summary": per_band, "heldout/compare": diffs}


def heldout_scalars(result: dict) -> dict[str, float]:
    """Each model's overall held-out accuracy as one number per model (names every tracker accepts: no '@')."""
    metric = result["metric"].replace("@", "_at_")
    return {
        f"heldout/{model}/{metric}": per["all"]["value"] for model, per in result["accuracy"].items() if "all" in per
    }
