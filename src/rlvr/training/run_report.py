"""A training run's own report: RUN/report.md and RUN/plots/*.png, what a training run (`rlvr train`, the Python
API's `train(cfg)`) leaves when training ends.

    train(cfg)                                  # rlvr.training.loop.train (rlvr train, `from rlvr import train`)
                                                # writes it when the run ends, or stops by signal: reporting()
    write_run_report("runs/train")              # or rebuilt from any run directory, at any time

Everything is read back from the files the run wrote (config.yaml, metrics.jsonl, contention.json), so its numbers
are the files' numbers. Its plots and warnings are the main job's (rlvr.training.main_job uses the same
`training_plots` and `run_warnings`): one rule each, in one place. The main job reports its RLVR run inside its own
report.md instead, with the held-out results beside it.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path

from rlvr.config import Config
from rlvr.evaluation import report
from rlvr.evaluation.demo_choice import DEMO_FILE, choice_markdown
from rlvr.evaluation.learning_signal import run_signal_warning
from rlvr.rundir.files import atomic_write_text, read_config
from rlvr.training.contention import contention_warning, emulated_bf16_warning
from rlvr.training.lifecycle import TrainingAborted
from rlvr.training.signal_watch import recorded_prompts

# The figures the report's table shows at the start and the end of training (the README's stable names).
FIGURES = (
    ("reward/mean", "reward"),
    ("verdict/correct_frac", "correct fraction (sampled)"),
    ("groups/nonzero_var_frac", "groups with reward variance"),
    ("adv/shaping_only_share", "advantage from groups where only shaping varied"),
    ("verdict/no_answer_frac", "no-answer fraction"),
    ("len/mean", "mean length (tokens)"),
    ("len/truncated_frac", "truncated fraction"),
    ("entropy", "entropy"),
    ("mismatch/k3_kl", "k3 KL(sampler || trainer)"),
    ("distill/reverse_kl", "sampled reverse KL to the teacher"),  # with a teacher only (docs/distillation.md)
    ("distill/share", "the teacher's share of the advantage"),
    ("val/accuracy", "validation accuracy (greedy)"),
)
EDGE = 5  # steps averaged at each end of the run


def training_plots(rows: list[dict], plots: Path, title: str = "RLVR training") -> dict[str, Path]:
    """The plots of a run's metrics by report title, each only where the run has its figures: training curves, the
    sampler-vs-trainer mismatch, tool use in episodes, band shares under a curriculum."""
    plots = Path(plots)
    out = {title: report.training_plot(rows, plots / "training.png", title=title)}
    for name, plot in (
        ("Sampler vs trainer on the trained tokens (mismatch/*)", report.mismatch_plot(rows, plots / "mismatch.png")),
        ("Tool use over training (episode/*)", report.episode_plot(rows, plots / "episodes.png")),
    ):
        if plot is not None:
            out[name] = plot
    if any(k.startswith("band/") for k in (rows[0] if rows else {})):
        from rlvr.prompts.bands import plot_curriculum

        out["Band share and reward over training"] = Path(plot_curriculum(rows, str(plots / "bands.png")))
    return out


def read_load(run_dir: Path) -> dict | None:
    """RUN/contention.json (the training phase's pace and the CPU others took), or None when not recorded."""
    path = Path(run_dir) / "contention.json"
    return json.loads(path.read_text()) if path.exists() else None


def run_warnings(run_dir: Path, rows: list[dict], quiet_steps_per_min: float = 0.0) -> list[str]:
    """The warnings a finished (or stopped) run's files call for, in the order a report shows them first: a contended
    machine or a run slower than the user's own figure, bf16 the CPU emulated (contention.json), a sampler that
    disagrees with the trainer and an update mostly from shaping (the metrics), steps without learning signal. Both
    reports (this one and the main job's) show this list: a new run-level warning is added here, once."""
    load = read_load(run_dir)
    found = [
        contention_warning(load, quiet_steps_per_min),
        emulated_bf16_warning(load),
        report.mismatch_warning(rows),
        report.shaping_warning(rows),
        # steps in a row without learning signal (rlvr.evaluation.learning_signal), advised for the run's rows
        run_signal_warning(run_dir, recorded_prompts(run_dir)),
    ]
    return [w for w in found if w]


def load_line(load: dict | None) -> str:
    """The RL phase's pace and the CPU other processes took meanwhile (RUN/contention.json), in one line."""
    if not load:
        return "not recorded"
    line = f"{load['steps']} steps in {load['train_s'] / 60:.1f} min ({load['steps_per_min']:.1f} steps/min)"
    if "other_share" in load:
        line += f"; other processes took {load['other_share']:.0%} of the {load['cores']} cores' CPU time meanwhile"
    return line


def config_meta(cfg: Config) -> dict[str, str | int]:
    """What was trained, from a resolved config: model, task, algorithm, seed, rollout (both reports' first lines)."""
    r = cfg.rollout
    return {
        "model": cfg.model.name,
        "task": f"{cfg.task.name} {cfg.task.settings or ''}".strip(),
        "algorithm": json.dumps(cfg.algorithm),
        "seed": cfg.seed,
        "rollout": f"{r.prompts_per_step} prompts x {r.group_size} samples, max {r.max_new_tokens} new "
        f"tokens, temperature {r.temperature}, sampler {r.backend}",
    }


def figures_markdown(rows: list[dict], edge: int = EDGE) -> str:
    """The FIGURES at the start and the end of training: each the mean over the first and the last `edge` steps
    that logged it (val/* only where validation ran), with how many steps did."""
    lines = [
        f"| figure | first {edge} steps | last {edge} steps | steps |",
        "|---|---|---|---|",
    ]
    for key, label in FIGURES:
        values = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
        if values:
            first, last = values[:edge], values[-edge:]
            cells = (f"{sum(first) / len(first):.4g}", f"{sum(last) / len(last):.4g}", str(len(values)))
            lines.append(f"| {label} (`{key}`) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _ending(run_dir: Path, cfg: Config, rows: list[dict], ended: str) -> str:
    """What the run's steps came to, and what to do next."""
    steps = f"{len(rows)} of train.steps {cfg.train.steps}"
    if ended:
        return f"{steps}; {ended}; `rlvr train --resume {run_dir}` continues from its last checkpoint"
    if (run_dir / "final" / "README.md").exists():
        return (
            f"{steps}; the model and its card are in final/ (final/README.md); `rlvr eval --model {run_dir}` "
            "evaluates it on held-out problems and adds the table to the card"
        )
    return steps


def write_run_report(run_dir, ended: str = "") -> Path | None:
    """RUN/report.md and RUN/plots/*.png from the run directory's files; None when it holds no step yet. `ended`:
    why the run stopped before its end (a signal, a diverged loss), said in the report."""
    run_dir = Path(run_dir)
    rows = report.read_metrics(run_dir)
    if not rows:
        return None
    cfg = read_config(run_dir)
    plots = training_plots(rows, run_dir / "plots")
    meta = {
        **config_meta(cfg),
        "steps": _ending(run_dir, cfg, rows, ended),
        "training load": load_line(read_load(run_dir)),
        "versions": ", ".join(f"{k} {v}" for k, v in report.versions().items()),
    }
    lines = [
        f"# rlvr train report: {run_dir.absolute().name}",
        "",
        *report.warning_lines(run_warnings(run_dir, rows, cfg.log.quiet_steps_per_min)),
    ]
    lines += ["## What was run", "", *[f"- **{k}**: {v}" for k, v in meta.items()], ""]
    if (run_dir / DEMO_FILE).exists():  # demo "auto", measured on the start model (rlvr.evaluation.demo_choice)
        lines += [choice_markdown(json.loads((run_dir / DEMO_FILE).read_text())), ""]
    lines += ["## Training figures", "", figures_markdown(rows), ""]
    lines += ["The training reward is not a result: `rlvr eval` measures the model on problems it never saw.", ""]
    lines += ["## Plots", "", *report.plot_lines(run_dir, plots)]
    path = run_dir / "report.md"
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path


def _why_stopped(error: BaseException) -> str | None:
    """The report's words for an exception that ends a run with its steps kept: a signal's stop (exit 130 / 143) or
    a diverged run (TrainingAborted); None for anything else (bad input, a crash: no report)."""
    if isinstance(error, SystemExit) and error.code in (130, 143):
        return f"stopped by {'SIGINT (Ctrl-C)' if error.code == 130 else 'SIGTERM'}"
    if isinstance(error, TrainingAborted):
        return "stopped: " + str(error).split(";")[0]
    return None


@contextmanager
def reporting(run_dir):
    """Write the run's report when the block ends: after training, and after a stop by signal or a diverged run
    (then re-raised, the exit code unchanged). Rank 0 alone writes (RANK under torchrun). A report that cannot be
    written is one line on stderr, and the run's own outcome stands."""
    ended = ""
    try:
        yield
    except BaseException as e:
        ended = _why_stopped(e)
        if ended is None:
            raise
        _write(run_dir, ended)
        raise
    _write(run_dir, ended)


def _write(run_dir, ended: str) -> None:
    if os.environ.get("RANK", "0") != "0":
        return
    try:
        path = write_run_report(run_dir, ended)
    except Exception as e:  # the run is done and saved: a report that fails must not turn that into a failure
        print(f"rlvr train: the report was not written ({type(e).__name__}: {e})", file=sys.stderr)
        return
    if path is not None:
        print(f"report: {path}")


__all__ = [
    "FIGURES",
    "training_plots",
    "run_warnings",
    "read_load",
    "load_line",
    "config_meta",
    "figures_markdown",
    "write_run_report",
    "reporting",
]
