"""Choose the main job's default by experiment: the RL phase of `make run` with its full time budget, for each
variant and seed, every run scored afterwards by `rlvr eval` on the same held-out problems.

    python benchmarks/choose_default.py --out runs/choose-default             # 4 variants x 3 seeds x 9 min
    python benchmarks/choose_default.py --out runs/choose-default --report    # tables and plot only
    python benchmarks/choose_default.py --experiment rollout-correction --out runs/correction-default
    python benchmarks/choose_default.py --experiment rollout-correction --preset reasoning-gym --out runs/correction-rg

Experiments (each variant a set of overrides of the preset; nothing else changes; the first is the baseline):
  choose-default (issue 25)
    default           the preset as it is
    adaptive          the adaptive curriculum over the three bands (prompts/curriculum.py)
    dynamic           DAPO's dynamic sampling on GRPO: zero-variance groups dropped and refilled, up to
                      algorithm.max_sampling_rounds rounds; the extra generation is inside the same wall-clock budget
    adaptive+dynamic  both
  rollout-correction (issue 33)
    none              the preset as it is: the update's own first-pass log-probs are the old policy
    truncated         each token's loss times min(pi_train / pi_sampler, cap), the weight detached

Runs go seed-major (seed 0 of every variant, then seed 1, ...) so that whatever else the machine does
touches every variant alike; a finished run (its final/ exists) is not run again, so the script resumes.
Each run is its own `rlvr train` process. Afterwards every run, and the start model once, is evaluated with
`rlvr eval` on the same held-out problems (the greedy decode, `--n 0`). The comparison pairs problems:
per problem, each variant's accuracy averaged over seeds, paired bootstrap over problems against `default`
(rlvr.evaluation.compare); per seed the same, to show whether the seeds agree. It writes OUT/results.md,
OUT/results.json and OUT/choose-default.png (validation accuracy and nonzero-variance fraction against
wall-clock minutes, mean over seeds). It measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from rlvr.evaluation.records import read_records
from rlvr.evaluation.summary import per_problem_values
from rlvr_bench.time_to_accuracy import cpu_busy, evaluate_all, rlvr_cli, task_flags

EXPERIMENTS = {
    "choose-default": {
        "default": [],
        "adaptive": ["curriculum={kind: adaptive}"],
        "dynamic": ["algorithm={preset: grpo, dynamic_sampling: true}"],
        "adaptive+dynamic": ["curriculum={kind: adaptive}", "algorithm={preset: grpo, dynamic_sampling: true}"],
    },
    "rollout-correction": {
        "none": [],
        "truncated": ["algorithm.rollout_correction=truncated"],
    },
}
# The chosen experiment's variants and its baseline (the first), set once by main(): a script, not a library.
VARIANTS = EXPERIMENTS["choose-default"]
BASE = "default"
PRESET = "default"
START = "start"
# The runs table's mismatch columns, in order (rlvr.algorithms.mismatch, rlvr.algorithms.correction)
RUN_FIGURES = (
    "mismatch/k3_kl",
    "mismatch/abs_log_ratio",
    "mismatch/max_ratio",
    "mismatch/outside_frac",
    "correction/weight_mean",
)


def train_runs(out: Path, seeds: list[int], minutes: float, sets: list[str]) -> None:
    for seed in seeds:
        for name, overrides in VARIANTS.items():
            run = out / f"{name}-s{seed}"
            if (run / "final").exists():
                continue
            busy = cpu_busy()
            if busy > 0.25:
                print(f"note: the CPUs are {busy:.0%} busy before {run.name}; the budget is wall-clock", flush=True)
            args = [
                "train",
                PRESET,
                "--overwrite",
                "--output-dir",
                str(run),
                "--set",
                f"seed={seed}",
                "--set",
                f"train.time_budget_min={minutes}",
            ]
            for s in overrides + sets:
                args += ["--set", s]
            out.mkdir(parents=True, exist_ok=True)
            t0 = time.time()
            rlvr_cli(args, out / f"{run.name}.train.log", os.cpu_count() or 1)
            print(f"{run.name}: {time.time() - t0:.0f} s", flush=True)


def eval_runs(out: Path, seeds: list[int], limit: int) -> None:
    """Every run and the start model on the same held-out problems, with the time-to-accuracy bench's settings."""
    first = out / f"{BASE}-s{seeds[0]}"
    models = {START: ["--model", "smollm2-135m-instruct", *task_flags(first / "config.yaml")]}
    models |= {f"{v}-s{s}": ["--model", str(out / f"{v}-s{s}")] for s in seeds for v in VARIANTS}
    evaluate_all(out, first / "config.yaml", models, argparse.Namespace(eval_limit=limit, threads=os.cpu_count() or 1))


def greedy_values(out: Path, name: str) -> dict[str, tuple[str, float]]:
    """{pid: (band, greedy correct 0/1)} of one evaluation."""
    return per_problem_values(read_records(out / "eval" / name / "records.jsonl"), "greedy")


def pooled_values(out: Path, seeds: list[int]) -> dict[str, dict[str, tuple[str, float]]]:
    """{variant: {pid: (band, greedy accuracy averaged over seeds)}}, the start model as one more variant."""
    values = {}
    for v in VARIANTS:
        per_seed = [greedy_values(out, f"{v}-s{s}") for s in seeds]
        values[v] = {
            pid: (band, sum(d[pid][1] for d in per_seed) / len(seeds)) for pid, (band, _) in per_seed[0].items()
        }
    values[START] = greedy_values(out, START)
    return values


def compare_values(values: dict, baseline: str, n_boot: int = 4000) -> dict:
    """Per band and overall: each variant's mean with a bootstrap interval and its paired difference to baseline."""
    from rlvr.evaluation.stats import bootstrap_ci, paired_bootstrap, paired_verdict

    pids = sorted(values[baseline])
    bands = sorted({values[baseline][p][0] for p in pids}) + ["all"]
    table = {}
    for name, vals in values.items():
        table[name] = {}
        for band in bands:
            members = [p for p in pids if band == "all" or values[baseline][p][0] == band]
            a = [vals[p][1] for p in members]
            row = dict(zip(("value", "lo", "hi"), bootstrap_ci(a, n_boot=n_boot)))
            if name != baseline:
                d, lo, hi = paired_bootstrap(a, [values[baseline][p][1] for p in members], n_boot=n_boot)
                row |= {
                    "diff": d,
                    "diff_lo": lo,
                    "diff_hi": hi,
                    "verdict": paired_verdict(lo, hi),
                    "sd_diff": _sd([vals[p][1] - values[baseline][p][1] for p in members]),
                    "n": len(members),
                }
            table[name][band] = row
    return {"bands": bands, "baseline": baseline, "table": table}


def problems_needed(sd: float, half_width: float = 0.15, z: float = 1.96) -> int:
    """Problems for a paired 95% interval of half-width `half_width` at this per-problem sd of the difference."""
    return int((z * sd / half_width) ** 2) + 1


def _sd(xs: list[float]) -> float:
    m = sum(xs) / len(xs)
    return (sum((x - m) ** 2 for x in xs) / max(1, len(xs) - 1)) ** 0.5


def _mismatch_means(metrics: list[dict]) -> dict:
    """Step means of the sampler-vs-trainer figures and of the correction's weight (max ratio: the run's max), over
    the steps that trained on something (before the fix, a step with no informative group logged its weight as 0)."""
    keys = ("mismatch/k3_kl", "mismatch/abs_log_ratio", "mismatch/outside_frac", "correction/weight_mean")
    trained = [r for r in metrics if r.get("active_rows", 1) > 0]
    res = {}
    for k in keys:
        xs = [r[k] for r in trained if k in r]
        res[k] = sum(xs) / len(xs) if xs else None
    ratios = [r["mismatch/max_ratio"] for r in metrics if "mismatch/max_ratio" in r]
    res["mismatch/max_ratio"] = max(ratios) if ratios else None
    return res


def run_summary(out: Path, seeds: list[int]) -> dict:
    """Per run: steps, minutes, mean nonzero-variance fraction, generated/kept groups, last validation accuracy."""
    rows = {}
    for s in seeds:
        for v in VARIANTS:
            m = [json.loads(x) for x in (out / f"{v}-s{s}" / "metrics.jsonl").read_text().splitlines()]
            vals = [r["val/accuracy"] for r in m if "val/accuracy" in r]
            rows[f"{v}-s{s}"] = {
                "steps": len(m),
                "minutes": sum(r["time/step"] for r in m) / 60,
                "nonzero_var_frac": sum(r["groups/nonzero_var_frac"] for r in m) / len(m),
                "generated_groups": sum(r.get("dynamic_sampling/generated_groups", 0) for r in m),
                "last_val": vals[-1] if vals else None,
                **_mismatch_means(m),
            }
    return rows


def per_seed_diffs(out: Path, seeds: list[int]) -> dict:
    """{variant: {seed: {band: diff}}}: the variant minus the baseline, same seed, same problems (greedy)."""
    res = {}
    for v in VARIANTS:
        if v == BASE:
            continue
        res[v] = {}
        for s in seeds:
            vals = {name: greedy_values(out, f"{name}-s{s}") for name in (v, BASE)}
            c = compare_values(vals, BASE, n_boot=1000)
            res[v][s] = {b: c["table"][v][b]["diff"] for b in c["bands"]}
    return res


def write_markdown(out: Path, seeds: list[int], pooled: dict, seeds_table: dict, runs: dict) -> str:
    bands = pooled["bands"]
    names = [START] + list(VARIANTS)
    lines = [
        f"Greedy held-out accuracy, mean over seeds {seeds} per problem, 95% bootstrap intervals over problems "
        f"({pooled['table'][START]['all']['n']} problems).",
        "",
        "| band | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for b in bands:
        cells = [
            f"{pooled['table'][n][b]['value']:.3f} [{pooled['table'][n][b]['lo']:.3f}, "
            f"{pooled['table'][n][b]['hi']:.3f}]"
            for n in names
        ]
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Paired against `{BASE}` (same problems, seeds averaged per problem):",
        "",
        "| band | variant | difference [95% CI] | verdict | problems | sd of per-problem difference | "
        "problems for +/-0.15 |",
        "|---|---|---|---|---|---|---|",
    ]
    for b in bands:
        for n in names[2:] + [START]:
            r = pooled["table"][n][b]
            lines.append(
                f"| {b} | {n} | {r['diff']:+.3f} [{r['diff_lo']:+.3f}, {r['diff_hi']:+.3f}] | "
                f"{r['verdict']} | {r['n']} | {r['sd_diff']:.3f} | {problems_needed(r['sd_diff'])} |"
            )
    lines += [
        "",
        f"Per seed, variant minus {BASE} (greedy, same problems):",
        "",
        "| variant | " + " | ".join(f"seed {s} ({b})" for s in seeds for b in ("all",)) + " |",
        "|---" * (len(seeds) + 1) + "|",
    ]
    for v, per in seeds_table.items():
        lines.append(f"| {v} | " + " | ".join(f"{per[s]['all']:+.3f}" for s in seeds) + " |")
    lines += [
        "",
        "Runs:",
        "",
        "| run | RL steps | minutes | mean nonzero-var fraction | groups generated | last validation accuracy | "
        "k3 KL | mean abs log ratio | max ratio | outside [1/2, 2] | correction weight |",
        "|---" * 11 + "|",
    ]
    for name, r in runs.items():
        lv = "" if r["last_val"] is None else f"{r['last_val']:.3f}"
        mm = [_fmt(r[k]) for k in RUN_FIGURES]
        lines.append(
            f"| {name} | {r['steps']} | {r['minutes']:.1f} | {r['nonzero_var_frac']:.2f} | "
            f"{r['generated_groups']} | {lv} | " + " | ".join(mm) + " |"
        )
    return "\n".join(lines) + "\n"


def _fmt(x: float | None) -> str:
    return "" if x is None else f"{x:.3g}"


def plot(out: Path, seeds: list[int], minutes: float) -> Path:
    """Validation accuracy and nonzero-variance fraction against wall-clock minutes, each variant's seeds averaged
    on a common time grid (thin lines: the single seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    grid = np.linspace(0, minutes, 37)
    for i, v in enumerate(VARIANTS):
        color = f"C{i}"
        for ax, key in zip(axes, ("val/accuracy", "groups/nonzero_var_frac")):
            curves = []
            for s in seeds:
                m = [json.loads(x) for x in (out / f"{v}-s{s}" / "metrics.jsonl").read_text().splitlines()]
                t = np.cumsum([r["time/step"] for r in m]) / 60
                pts = [(tt, r[key]) for tt, r in zip(t, m) if key in r]
                x, y = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])
                ax.plot(x, y, color=color, alpha=0.25, lw=0.8)
                curves.append(np.interp(grid, x, y, left=np.nan, right=np.nan))
            ax.plot(grid, np.nanmean(np.array(curves), axis=0), color=color, lw=2, label=v)
    axes[0].set(title="greedy validation accuracy (45 problems)", xlabel="wall-clock minutes")
    axes[1].set(title="nonzero-variance fraction of groups", xlabel="wall-clock minutes")
    axes[0].legend()
    fig.tight_layout()
    path = out / f"{out.name}.png"
    fig.savefig(path, dpi=110)
    return path


def report(out: Path, seeds: list[int], minutes: float) -> None:
    pooled = compare_values(pooled_values(out, seeds), BASE)
    seeds_table = per_seed_diffs(out, seeds)
    runs = run_summary(out, seeds)
    md = write_markdown(out, seeds, pooled, seeds_table, runs)
    (out / "results.md").write_text(md)
    (out / "results.json").write_text(json.dumps({"pooled": pooled, "per_seed": seeds_table, "runs": runs}, indent=1))
    plot(out, seeds, minutes)
    print(md)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--experiment", choices=list(EXPERIMENTS), default="choose-default")
    ap.add_argument("--preset", default="default", help="the training preset every variant starts from")
    ap.add_argument("--out", default="runs/choose-default")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--minutes", type=float, default=9.0, help="each run's RL budget (the main job's: 9)")
    ap.add_argument("--limit", type=int, default=300, help="held-out problems, evenly across bands")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="more overrides for every run")
    ap.add_argument("--report", action="store_true", help="only tabulate and plot finished runs")
    args = ap.parse_args()
    global VARIANTS, BASE, PRESET
    VARIANTS, PRESET = EXPERIMENTS[args.experiment], args.preset
    BASE = next(iter(VARIANTS))
    out, seeds = Path(args.out), [int(s) for s in args.seeds.split(",")]
    if not args.report:
        train_runs(out, seeds, args.minutes, args.sets)
        eval_runs(out, seeds, args.limit)
    report(out, seeds, args.minutes)


if __name__ == "__main__":
    main()
