"""What on-policy distillation is worth (issue 62 on the embedded default; issue 73 with a larger teacher): arms
trained the same steps at each seed, then scored on the same held-out problems.

    python benchmarks/distill_experiment.py --teacher runs/distill/teacher --out runs/distill      # train, eval, report
    python benchmarks/distill_experiment.py --teacher runs/distill/teacher --out runs/distill --report
    # a student and a larger teacher of one tokenizer, on another config (issue 73: the 0.5B and the 1.5B):
    python benchmarks/distill_experiment.py --teacher qwen-1.5b.gguf --config docs/examples/multi_step/multi_step.yaml \
        --set model.name=qwen-0.5b.gguf --set task.settings.demo=none --arms rlvr,mix,control --steps 10 --n 2 --limit 80

The teacher is the RLVR model of the default preset (a run directory: `rlvr train default --set train.steps=40
--set train.time_budget_min=0 --output-dir runs/distill/teacher`), so its held-out pass@1 is the ceiling the student
(the start model, the same base: the teacher's adapter is switched to on the student's own weights) can reach.
Arms, each `rlvr train CONFIG` (--config, the default preset unless given, with --set) for --steps steps at each
seed, nothing else changed:
  rlvr      RLVR alone (the preset)
  distill   the teacher's per-token term alone (distill.verifier false)
  mix       the teacher's term beside the verifier's group advantage
  control   the mix with the teacher's term replaced by its mean over the step's tokens (distill.control constant):
            the same size, no per-token information
Every run, the teacher and the start model are scored by `rlvr eval` on the same held-out problems (--n samples a
problem at the training temperature, plus the greedy decode): pass@1 per arm and seed with 95% bootstrap intervals
over problems, and each arm against RLVR alone paired by problem (per problem, the arm's pass@1 averaged over seeds).
Steps and wall-clock to 90% of the teacher: the first validation point (greedy, the preset's validation problems every
log.eval_every steps) at or above 0.9 x the teacher run's last validation accuracy; wall-clock is the run's summed
time/step up to that step (the teacher's scoring included). Runs go seed-major and a finished one (its final/ exists)
is kept, so the script resumes. It measures; it asserts nothing. Writes OUT/results.md, OUT/results.json and
OUT/distill.png (validation accuracy, reverse KL to the teacher and entropy by step).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from rlvr.evaluation.records import read_records
from rlvr.evaluation.summary import per_problem_values
from rlvr_bench.time_to_accuracy import ROWS_PER_CALL, load_config, rlvr_cli, task_flags

THREADS = os.cpu_count() or 1

ARMS = ("rlvr", "distill", "mix", "control")


def arm_sets(arm: str, teacher: str, coef: float) -> list[str]:
    """The overrides of one arm (rlvr: none)."""
    if arm == "rlvr":
        return []
    sets = [f"distill.teacher={teacher}", f"distill.coef={coef}", f"distill.verifier={arm != 'distill'}".lower()]
    return sets + (["distill.control=constant"] if arm == "control" else [])


def train_all(out: Path, a) -> None:
    for seed in a.seeds:
        for arm in a.arms:
            run = out / f"{arm}-s{seed}"
            if (run / "final").exists():
                continue
            sets = [*a.set, f"seed={seed}", f"train.steps={a.steps}", "train.time_budget_min=0"]
            sets += arm_sets(arm, a.teacher, a.coef)
            args = ["train", a.config, "--overwrite", "--output-dir", str(run)]
            rlvr_cli(args + [x for s in sets for x in ("--set", s)], out / f"{run.name}.train.log", THREADS)


def eval_all(out: Path, a) -> None:
    """Every run, the teacher and the start model: the same problems, samples, length and seed."""
    config = out / f"{a.arms[0]}-s{a.seeds[0]}" / "config.yaml"
    first = load_config(config)
    # the teacher last: the slowest to evaluate, and the one figure a run can be read without
    models = {"start": first["model"]["name"]}
    models |= {f"{arm}-s{s}": str(out / f"{arm}-s{s}") for s in a.seeds for arm in a.arms} | {"teacher": a.teacher}
    length = str(first["rollout"]["max_new_tokens"])
    for name, target in models.items():
        dest = out / "eval" / name
        if (dest / "records.jsonl").exists():
            continue
        args = ["eval", "--model", target, "--n", str(a.n), "--limit", str(a.limit), "--seed", "0", "--quiet"]
        args += ["--max-new-tokens", length, "--rows-per-call", ROWS_PER_CALL, "--out", str(dest), "--overwrite"]
        if not (Path(target) / "config.yaml").exists():  # a model that carries no task (the start, a teacher model)
            args += task_flags(config)
        rlvr_cli(args, out / f"eval-{name}.log", THREADS)


def metric(a) -> str:
    """What each problem scores: pass@1 over its --n samples, or with --n 0 its greedy decode."""
    return "greedy" if a.n == 0 else "pass@1"


def pass1(out: Path, name: str, a) -> dict[str, float]:
    """{problem id: pass@1 (greedy with --n 0)} of one evaluation."""
    records = read_records(out / "eval" / name / "records.jsonl")
    return {p: v for p, (_, v) in per_problem_values(records, metric(a)).items()}


def bands(out: Path, name: str, a) -> dict[str, str]:
    """{problem id: difficulty band} of one evaluation."""
    records = read_records(out / "eval" / name / "records.jsonl")
    return {p: b for p, (b, _) in per_problem_values(records, metric(a)).items()}


def metrics(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def to_teacher(rows: list[dict], target: float | None) -> tuple[int | None, float | None]:
    """(steps, minutes) to the first validation accuracy >= target: the step after which it was measured (val at
    step s ran before step s trained, on the weights of s updates) and the summed time/step before it."""
    for i, r in enumerate(rows if target is not None else []):
        if r.get("val/accuracy", -1) >= target:
            return r["step"], sum(x["time/step"] for x in rows[:i]) / 60
    return None, None


def report(out: Path, a) -> dict:
    from rlvr.evaluation.stats import bootstrap_ci, paired_bootstrap, paired_verdict

    # 90% of the teacher run's last validation accuracy; none where the teacher is a model, not a run that validated
    log = Path(a.teacher) / "metrics.jsonl"
    vals = [r["val/accuracy"] for r in metrics(Path(a.teacher)) if "val/accuracy" in r] if log.exists() else []
    teacher_val = vals[-1] if vals else None
    target = 0.9 * teacher_val if vals else None
    res: dict = {"teacher_val": teacher_val, "target": target, "models": {}, "arms": {}}
    for name in ("start", "teacher"):
        res["models"][name] = dict(zip(("value", "lo", "hi"), bootstrap_ci(list(pass1(out, name, a).values()))))
    rl = {s: pass1(out, f"rlvr-s{s}", a) for s in a.seeds}
    pids = sorted(rl[a.seeds[0]])
    rl_mean = [sum(rl[s][p] for s in a.seeds) / len(a.seeds) for p in pids]
    means: dict[str, list[float]] = {}
    band_of = bands(out, "start", a)
    res["bands"] = {b: {m: _mean(pass1(out, m, a), band_of, b) for m in ("start", "teacher")} for b in band_of.values()}
    for arm in a.arms:
        per = {s: pass1(out, f"{arm}-s{s}", a) for s in a.seeds}
        mean = [sum(per[s][p] for s in a.seeds) / len(a.seeds) for p in pids]
        row = {"pooled": dict(zip(("value", "lo", "hi"), bootstrap_ci(mean)))}
        for b in res["bands"]:  # per band: the arm's pass@1 pooled over seeds, and paired against RLVR's
            mine = [m for p, m in zip(pids, mean) if band_of[p] == b]
            theirs = [m for p, m in zip(pids, rl_mean) if band_of[p] == b]
            res["bands"][b][arm] = sum(mine) / len(mine)
            if arm != "rlvr":
                res["bands"][b][f"{arm} - rlvr"] = paired_bootstrap(mine, theirs)
        row["seeds"] = {s: dict(zip(("value", "lo", "hi"), bootstrap_ci(list(per[s].values())))) for s in a.seeds}
        if arm != "rlvr":
            d, lo, hi = paired_bootstrap(mean, rl_mean)
            row["vs_rlvr"] = {"diff": d, "lo": lo, "hi": hi, "verdict": paired_verdict(lo, hi)}
        runs = {s: metrics(out / f"{arm}-s{s}") for s in a.seeds}
        row["to_teacher"] = {s: to_teacher(runs[s], target) for s in a.seeds}
        row["minutes"] = {s: sum(r["time/step"] for r in runs[s]) / 60 for s in a.seeds}
        row["teacher_share"] = {
            s: sum(r.get("time/teacher", 0.0) for r in runs[s]) / sum(r["time/step"] for r in runs[s]) for s in a.seeds
        }
        row["distill"] = {
            s: {k: sum(r.get(f"distill/{k}", 0.0) for r in runs[s]) / len(runs[s]) for k in ("reverse_kl", "share")}
            for s in a.seeds
        }
        res["arms"][arm] = row
        means[arm] = mean
    if "mix" in means and "control" in means:  # the teacher's per-token information, its size held equal
        d, lo, hi = paired_bootstrap(means["mix"], means["control"])
        res["mix_vs_control"] = {"diff": d, "lo": lo, "hi": hi, "verdict": paired_verdict(lo, hi)}
    (out / "results.json").write_text(json.dumps(res, indent=1) + "\n")
    plot(out, a, target)
    md = markdown(res, a)
    (out / "results.md").write_text(md)
    print(md)
    return res


def plot(out: Path, a, target: float | None) -> Path:
    """Per step, each arm's seeds averaged (thin lines: single seeds): greedy validation accuracy with the 90% line,
    the sampled reverse KL to the teacher (the rlvr arm logs none: distill.coef 0), and the policy's entropy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    keys = (("val/accuracy", "greedy validation accuracy"), ("distill/reverse_kl", "sampled reverse KL to the teacher"))
    keys += (("entropy", "entropy of the policy (nats per token)"),)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for i, arm in enumerate(a.arms):
        for ax, (key, _) in zip(axes, keys):
            curves = []
            for s in a.seeds:
                pts = [(r["step"], r[key]) for r in metrics(out / f"{arm}-s{s}") if key in r]
                if pts:
                    x, y = np.array(pts).T
                    ax.plot(x, y, color=f"C{i}", alpha=0.3, lw=0.8)
                    curves.append(y)
            if curves and len({len(c) for c in curves}) == 1:
                ax.plot(x, np.mean(curves, axis=0), color=f"C{i}", lw=2, label=arm)
    if target is not None:
        axes[0].axhline(target, color="gray", ls="--", lw=1, label="90% of the teacher")
    for ax, (_, title) in zip(axes, keys):
        ax.set(title=title, xlabel="step")
        if ax.lines:
            ax.legend()
        else:  # e.g. no validation in the runs (log.eval_every 0): say so rather than draw an empty frame
            ax.text(0.5, 0.5, "not logged by these runs", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    path = out / "distill.png"
    fig.savefig(path, dpi=100)
    return path


def _mean(values: dict[str, float], band_of: dict[str, str], band: str) -> float:
    chosen = [v for p, v in values.items() if band_of[p] == band]
    return sum(chosen) / len(chosen)


def _ci(r: dict) -> str:
    return f"{r['value']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}]"


def markdown(res: dict, a) -> str:
    seeds = a.seeds
    ninety = (
        f" 90% of the teacher: greedy validation accuracy >= {res['target']:.3f} (teacher {res['teacher_val']:.3f})."
        if res["target"] is not None
        else " (The teacher is a model, not a run that validated: no steps to 90% of it.)"
    )
    lines = [
        f"Held-out {'greedy accuracy (' if a.n == 0 else f'pass@1 ({a.n} samples a problem, '}{a.limit} problems), "
        f"arms at {a.steps} steps, seeds {seeds}; "
        f"start {_ci(res['models']['start'])}, teacher {_ci(res['models']['teacher'])}.{ninety}",
        "",
        "| arm | pass@1, seeds pooled | " + " | ".join(f"seed {s}" for s in seeds) + " | against RLVR alone, paired | "
        "steps to 90% of the teacher | minutes to it | minutes in all | teacher's share of the time | "
        "reverse KL (mean of steps) | teacher's share of the advantage |",
        "|---" * (len(seeds) + 9) + "|",
    ]
    for arm, r in res["arms"].items():
        vs = r.get("vs_rlvr")
        against = f"{vs['diff']:+.3f} [{vs['lo']:+.3f}, {vs['hi']:+.3f}] {vs['verdict']}" if vs else ""
        steps = ", ".join("-" if r["to_teacher"][s][0] is None else str(r["to_teacher"][s][0]) for s in seeds)
        mins = ", ".join("-" if r["to_teacher"][s][1] is None else f"{r['to_teacher'][s][1]:.1f}" for s in seeds)
        lines.append(
            f"| {arm} | {_ci(r['pooled'])} | "
            + " | ".join(_ci(r["seeds"][s]) for s in seeds)
            + f" | {against} | {steps} | {mins} | "
            + ", ".join(f"{r['minutes'][s]:.1f}" for s in seeds)
            + " | "
            + ", ".join(f"{r['teacher_share'][s]:.0%}" for s in seeds)
            + " | "
            + ", ".join(f"{r['distill'][s]['reverse_kl']:.3f}" for s in seeds)
            + " | "
            + ", ".join(f"{r['distill'][s]['share']:.2f}" for s in seeds)
            + " |"
        )
    if "mix_vs_control" in res:
        vs = res["mix_vs_control"]
        lines += ["", f"mix - control, paired: {vs['diff']:+.3f} [{vs['lo']:+.3f}, {vs['hi']:+.3f}] {vs['verdict']}."]
    others = [arm for arm in a.arms if arm != "rlvr"]
    lines += [
        "",
        "Per band, pass@1 pooled over seeds; each arm minus RLVR alone, paired by problem:",
        "",
        "| band | start | teacher | " + " | ".join(a.arms) + " | " + " | ".join(f"{x} - rlvr" for x in others) + " |",
        "|---" * (3 + len(a.arms) + len(others)) + "|",
    ]
    for b, r in res["bands"].items():
        diffs = [r[f"{x} - rlvr"] for x in others]
        lines.append(
            f"| {b} | {r['start']:.3f} | {r['teacher']:.3f} | "
            + " | ".join(f"{r[x]:.3f}" for x in a.arms)
            + " | "
            + " | ".join(f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]" for d, lo, hi in diffs)
            + " |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--teacher", required=True, help="the teacher: a run directory, a model folder or a GGUF file")
    ap.add_argument("--config", default="default", help="the preset or config file every arm trains")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an override of every arm")
    ap.add_argument("--out", default="runs/distill")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--coef", type=float, default=1.0)
    ap.add_argument("--n", type=int, default=4, help="samples a problem in the held-out evaluation (0: greedy only)")
    ap.add_argument("--limit", type=int, default=120, help="held-out problems (the default preset's)")
    ap.add_argument("--report", action="store_true", help="only tabulate finished runs")
    a = ap.parse_args()
    a.seeds, a.arms = [int(s) for s in a.seeds.split(",")], a.arms.split(",")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if not a.report:
        train_all(out, a)
        eval_all(out, a)
    report(out, a)


if __name__ == "__main__":
    main()
