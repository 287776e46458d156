"""`rlvr bench --vs trl --budget MINUTES`: what a faster step buys. rlvr and TRL's GRPOTrainer each train one config
(--config, the default preset unless given, with --set on top: model, task, reward, P x G, length limit, temperature,
learning rate, LoRA, truncated completions in or out of the loss) for the same wall-clock budget,
one after the other on this machine; then the start model and both sides' checkpoints are scored by `rlvr eval` on
the same held-out problems (same seed, samples and verifier), and the finals are compared with paired intervals.

    rlvr bench --vs trl --budget 9 --out runs/tta --trl-python /work/trl-venv/bin/python

rlvr: `rlvr train CONFIG` with `train.time_budget_min` (its clock starts after loading; the last step is the one
after which another would end past the budget; every checkpoint kept). `--rlvr-run DIR` reuses a finished run of
the same config instead; `--frameworks trl` trains TRL alone (against a run whose folder is gone: its figures then
come from where they were recorded, unpaired).

    rlvr bench --vs trl --budget 68.5 --frameworks trl --config docs/examples/multi_step/multi_step.yaml \
        --set model.name=qwen.gguf --set task.settings.demo=none --set 'task.settings.splits={...}' --eval-limit 80
TRL: rlvr_bench.trl_worker.run_trl_budget under TRL's interpreter, the step bench's settings (`loss_type="grpo"`,
`beta=0`, bf16, no gradient checkpointing, rlvr's prompt stream and reward functions), the same clock rule, its
adapter saved every `--trl-save-every` steps. Points on the curve: each side's checkpoint nearest each of
`--points` minutes, plus its final model. Evaluations already made (OUT/eval/NAME/records.jsonl) are reused, so an
interrupted comparison resumes and the start model can be copied in from another comparison with the same settings.
Writes OUT/time_to_accuracy.md / .json / .png and OUT/compare-*.{md,json,png}.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROWS_PER_CALL = "64"  # every held-out evaluation's, so that one experiment's start evaluation serves another
EVAL_ARGS = [
    "--split",
    "heldout",
    "--n",
    "0",
    "--backend",
    "fast",
    "--seed",
    "0",
    "--rows-per-call",
    ROWS_PER_CALL,
    "--quiet",
]
START = "start"
LABELS = {"rlvr": "rlvr", "trl": "TRL"}


def cpu_busy(seconds: float = 2.0) -> float:
    """The fraction of CPU time spent busy over the next `seconds` (from /proc/stat; 0.0 where it is absent). The
    load average would lag: it still counts a job that ended a minute ago."""

    def sample():
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return sum(fields), fields[3] + fields[4]  # total, idle + iowait

    if not Path("/proc/stat").exists():
        return 0.0
    import time

    (t0, i0), _ = sample(), time.sleep(seconds)
    t1, i1 = sample()
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


def rlvr_cli(args: list[str], log: Path, threads: int) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    print("$ rlvr " + " ".join(args), file=sys.stderr, flush=True)
    with open(log, "w") as fh:
        if subprocess.run(
            [sys.executable, "-m", "rlvr", *args], stdout=fh, stderr=subprocess.STDOUT, env=env
        ).returncode:
            raise RuntimeError(f"rlvr {args[0]} failed; see {log}")


def overrides(args) -> list[str]:
    """KEY=VALUE for every override the comparison makes: the seed, then the user's --set."""
    return [f"seed={args.seed}", *args.set]


def load_config(config: Path) -> dict:
    """The comparison's config file, as a dict (rlvr_bench.time_to_accuracy.comparison_config)."""
    import yaml

    return yaml.safe_load(config.read_text())


def train_rlvr(out: Path, args) -> Path | None:
    """rlvr's run: --rlvr-run, else `rlvr train CONFIG` for the budget; None where --frameworks leaves rlvr out."""
    if args.rlvr_run:
        return Path(args.rlvr_run)
    if "rlvr" not in args.frameworks.split(","):
        return None
    run = out / "rlvr"
    if not (run / "final").exists():
        rlvr_cli(
            [
                "train",
                args.config,
                "--overwrite",
                "--output-dir",
                str(run),
                *[x for kv in overrides(args) for x in ("--set", kv)],
                "--set",
                f"train.time_budget_min={args.budget}",
                "--set",
                "log.keep_checkpoints=0",
            ],
            out / "rlvr.train.log",
            args.threads,
        )
    return run


def comparison_config(out: Path, run: Path | None, args) -> Path:
    """The config file both sides take: rlvr's run's config.yaml (what it ran, `auto` made concrete), else --config
    with the overrides, resolved here and written to OUT/config.yaml (TRL alone: --frameworks trl)."""
    if run is not None:
        return run / "config.yaml"
    import yaml

    from rlvr.config import resolve
    from rlvr.machine import auto_dtypes

    path = out / "config.yaml"
    path.write_text(yaml.safe_dump(auto_dtypes(resolve(args.config, overrides(args))), sort_keys=False))
    return path


def trl_spec(config: Path, args, side: Path) -> dict:
    """The TRL worker's spec: the comparison config (its task, prompts, reward, learning rate, temperature and LoRA:
    the worker's bench_config reads them) and its model, shape and seed."""
    from rlvr.policy.load import resolve_model_path

    cfg = load_config(config)
    r = cfg["rollout"]
    return {
        "config": str(config),
        "model": resolve_model_path(cfg["model"]["name"]),
        "prompts": r["prompts_per_step"],
        "group": r["group_size"],
        "max_new_tokens": r["max_new_tokens"],
        "lora": cfg["model"]["lora"]["enabled"],
        "bf16": cfg["train"]["autocast"] == "bfloat16",
        "sampler": r["backend"],
        "seed": cfg["seed"],
        "threads": args.threads,
        "steps": 10_000,
        "budget_min": args.budget,
        "save_every": args.trl_save_every,
        "out": str(side),
    }


def train_trl(out: Path, config: Path, args) -> Path:
    from rlvr_bench.parent import Worker

    side = out / "trl"
    if not (side / "done.json").exists():
        spec = trl_spec(config, args, side)
        for stale in ("metrics.jsonl", "checkpoints.jsonl"):
            (side / stale).unlink(missing_ok=True)
        print("$ TRL GRPOTrainer, budget", args.budget, "min", file=sys.stderr, flush=True)
        worker = Worker("trl-budget", args.trl_python, spec, args.verbose)
        try:
            ready = worker.read("ready")
            done = worker.close()
        finally:
            worker.kill()
        (side / "done.json").write_text(json.dumps({"ready": ready, "done": done}))
    return side


def rlvr_points(run: Path) -> list[tuple[float, Path]]:
    """(minutes trained, checkpoint) for every checkpoint of the rlvr run; minutes from its per-step times."""
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    cum = [0.0]
    for r in rows:
        cum.append(cum[-1] + r["time/step"] / 60)
    points = []
    for ckpt in (run / "checkpoints").glob("step-*"):
        steps = int(ckpt.name.split("-")[1])
        points.append((cum[min(steps, len(rows))], ckpt))
    return sorted(points)


def trl_points(side: Path) -> list[tuple[float, Path]]:
    rows = [json.loads(x) for x in (side / "checkpoints.jsonl").read_text().splitlines() if x.strip()]
    return sorted((r["minutes"], side / "checkpoints" / f"step-{r['step']}") for r in rows)


POINTS = {"rlvr": rlvr_points, "trl": trl_points}  # each side's (minutes trained, checkpoint) from its folder


def choose(points: list[tuple[float, Path]], targets: list[float]) -> list[tuple[float, Path]]:
    """The checkpoint nearest each target minute, and the last one (the final model), without repeats."""
    picked = [min(points, key=lambda p: abs(p[0] - t)) for t in targets] + [points[-1]]
    return sorted(dict.fromkeys(picked))


def task_flags(config: Path) -> list[str]:
    """--task and the comparison's task settings, for models that carry none (the start model, TRL's adapters)."""
    cfg = load_config(config)
    flags = ["--task", cfg["task"]["name"]]
    for key, value in cfg["task"]["settings"].items():
        flags += ["--set", f"task.settings.{key}={json.dumps(value)}"]
    return flags


def evaluate_all(out: Path, config: Path, models: dict[str, list[str]], args) -> None:
    """Every model with the same settings: EVAL_ARGS, the comparison's generation length, --eval-limit problems."""
    length = load_config(config)["rollout"]["max_new_tokens"]
    for name, target in models.items():
        dest = out / "eval" / name
        if not (dest / "records.jsonl").exists():
            rlvr_cli(
                [
                    "eval",
                    *target,
                    *EVAL_ARGS,
                    "--max-new-tokens",
                    str(length),
                    "--limit",
                    str(args.eval_limit),
                    "--out",
                    str(dest),
                ],
                out / f"eval-{name}.log",
                args.threads,
            )


def curve_values(out: Path, name: str) -> dict:
    """Greedy accuracy with its bootstrap interval, per band and over all bands, of one evaluation."""
    from rlvr.evaluation.records import read_records
    from rlvr.evaluation.summary import interval, per_problem_values

    vals = per_problem_values(read_records(out / "eval" / name / "records.jsonl"), "greedy")
    bands = sorted({b for b, _ in vals.values()})
    res = {b: interval([v for bb, v in vals.values() if bb == b], 2000, 0.05, 0) for b in bands}
    res["all"] = interval([v for _, v in vals.values()], 2000, 0.05, 0)
    return res


def run_time_to_accuracy(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    busy = cpu_busy()
    if busy > 0.25:
        print(
            f"note: the CPUs are {busy:.0%} busy before training starts: the budget is wall-clock, so anything else "
            f"running costs steps",
            file=sys.stderr,
        )
    targets = (
        [float(t) for t in args.points.split(",") if t.strip()]
        if args.points
        else [args.budget / 3, 2 * args.budget / 3]
    )
    run = train_rlvr(out, args)
    config = comparison_config(out, run, args)
    side = train_trl(out, config, args)
    flags = task_flags(config)
    sides = {"rlvr": run, "trl": side} if run is not None else {"trl": side}
    curves = {name: choose(POINTS[name](d), targets) for name, d in sides.items()}
    models = {START: ["--model", load_config(config)["model"]["name"], *flags]}
    for name, points in curves.items():
        for _minutes, ckpt in points:
            models[f"{name}-{ckpt.name}"] = ["--model", str(ckpt)] + (flags if name == "trl" else [])
    evaluate_all(out, config, models, args)
    return report(out, sides, curves)


def report(out: Path, sides: dict[str, Path], curves: dict) -> int:
    """Each final against the start model and, with both sides, rlvr against TRL; the curve's points and plot."""
    from rlvr.evaluation.compare import compare, compare_markdown, write_comparison
    from rlvr.evaluation.records import read_records

    finals = {name: f"{name}-{points[-1][1].name}" for name, points in curves.items()}
    evals = {"start": read_records(out / "eval" / START / "records.jsonl")}
    evals |= {name: read_records(out / "eval" / final / "records.jsonl") for name, final in finals.items()}
    md = []
    for base in ("start", "trl")[: len(evals) - 1]:  # greedy: what the main job's validation tracks, one decode each
        result = compare(evals, baseline=base, metric="greedy")
        write_comparison(result, out, name=f"compare-greedy-vs-{base}")
        md.append(f"### greedy accuracy, against {base}\n\n" + compare_markdown(result))
    steps = {
        name: sum(1 for x in (d / "metrics.jsonl").read_text().splitlines() if x.strip()) for name, d in sides.items()
    }
    points = {
        name: [{"minutes": m, "model": f"{name}-{c.name}", **curve_values(out, f"{name}-{c.name}")} for m, c in pts]
        for name, pts in curves.items()
    }
    points["start"] = [{"minutes": 0.0, "model": START, **curve_values(out, START)}]
    head = ["RL steps in the budget: " + ", ".join(f"{LABELS[name]} {n}" for name, n in steps.items()) + ".", ""]
    (out / "time_to_accuracy.md").write_text("\n".join(head + md))
    (out / "time_to_accuracy.json").write_text(json.dumps({"steps": steps, "points": points}, indent=1))
    plot(points, out / "time_to_accuracy.png")
    print("\n".join(head + md))
    return 0


def plot(points: dict, path: Path) -> None:
    """Greedy held-out accuracy against minutes trained, per band and over all, one line per framework."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bands = [k for k in points["start"][0] if k not in ("minutes", "model")]
    fig, axes = plt.subplots(1, len(bands), figsize=(3.6 * len(bands), 3.4), sharey=True)
    for ax, band in zip(axes, bands):
        for name, color in (("rlvr", "C0"), ("trl", "C1")):
            if name not in points:
                continue
            pts = points["start"] + points[name]
            x = [p["minutes"] for p in pts]
            y = [p[band]["value"] for p in pts]
            err = [[p[band]["value"] - p[band]["lo"] for p in pts], [p[band]["hi"] - p[band]["value"] for p in pts]]
            ax.errorbar(x, y, yerr=err, color=color, marker="o", capsize=3, label=name)
        ax.set(title=band, xlabel="minutes trained")
    axes[0].set_ylabel("greedy held-out accuracy")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
