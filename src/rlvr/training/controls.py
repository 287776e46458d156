"""The main job's control runs (`rlvr run --controls`, eval.controls): RL under a reward that carries no answer,
or without the episode's tools.

Each control is an RL run with the RLVR run's budget, seed and settings, in root/control-<kind>, and an entry of
rlvr.verifiers.controls.CONTROLS, which says what it changes: "random_rate" and "format_only" (and a plug-in,
package.module:attr) replace its reward (reward.control); "no_tools" (single_turn) trains single-turn without
the tools (episode.environment none, and the task's settings for a prompt without tools where it has them, e.g.
tool_arithmetic's with_tools: false). It is evaluated on the same held-out problems (a no_tools control without
tools, every control by the real grader), and the report shows RLVR minus each control per band (paired bootstrap
over problems) and the training curves side by side. A gain that survives the controls is not explained by the
format reward, by any reward paid at the policy's own success rate, or, for an environment task, by RL alone.
"""

from __future__ import annotations

import copy
from pathlib import Path

from rlvr.config import Config
from rlvr.environments.build import episodic
from rlvr.verifiers.controls import CONTROLS


def control_name(kind: str) -> str:
    return f"control-{kind}"


def without_tools(cfg: Config) -> Config:
    """`cfg` single-turn, without tools: episode.environment none, and the task's settings for a prompt that offers
    none where the task has them (its class attribute `without_tools`)."""
    from rlvr.tasks import load_task

    sub = copy.deepcopy(cfg)
    sub.episode.environment, sub.episode.tools = "none", []  # no tools offered, none named
    task = load_task(cfg.task.name, **cfg.task.settings)
    sub.task.settings.update(getattr(task, "without_tools", {}))
    return sub


def single_turn(kind: str) -> bool:
    """Whether the control `kind` (an eval.controls item) changes the episode rather than the reward: its CONTROLS
    entry's single_turn (no_tools)."""
    return CONTROLS.get(kind, "eval.controls").single_turn


def control_cfg(rl_cfg: Config, root: Path, kind: str) -> Config:
    """The RLVR phase's config with the control's change (its reward, or no tools), run directory
    root/control-<kind> and tracker name."""
    sub = without_tools(rl_cfg) if single_turn(kind) else copy.deepcopy(rl_cfg)
    sub.output_dir = str(Path(root) / control_name(kind))
    if not single_turn(kind):
        sub.reward.control = kind
    sub.log.run_name = f"{rl_cfg.log.run_name or Path(root).absolute().name}-{control_name(kind)}"
    return sub


def control_eval_cfg(cfg: Config, kind: str) -> Config:
    """The main job's config as a control is evaluated: the real grader always; no tools for a single-turn control
    (no_tools)."""
    return without_tools(cfg) if single_turn(kind) else cfg


def check_controls(cfg: Config, root: Path, rl_cfg: Config) -> None:
    """Build each control's components before any phase runs: a control that cannot apply (format_only on a reward
    without a format term) stops the main job at the start (ConfigError), not after the RLVR phase."""
    from rlvr.errors import ConfigError
    from rlvr.training.step import check_components

    for kind in cfg.eval.controls:
        if single_turn(kind) and not episodic(cfg.episode):
            raise ConfigError(
                f"eval.controls: {kind} compares against RL without tools; this run has none (episode.environment: none)"
            )
        check_components(control_cfg(rl_cfg, root, kind))


def run_controls(cfg: Config, root: Path, rl_cfg: Config, rlvr_records, *, train, evaluate, timed, quiet: bool) -> dict:
    """Train (unless finished) and evaluate every control of eval.controls; compare RLVR against each.
    `train` is rlvr.training.loop.train, `evaluate(name, model, cfg, root, quiet) -> (records, summary)` the main
    job's held-out evaluation, `timed` its PhaseClock (rlvr.training.main_folder). Returns {kind: {"summary",
    "compare"}}."""
    from rlvr.evaluation.compare import compare, write_comparison

    out = {}
    for kind in cfg.eval.controls:
        name, run_dir = control_name(kind), Path(root) / control_name(kind)
        if not (run_dir / "final" / "merged").exists():
            resume = (run_dir / "checkpoints").exists()
            timed(
                f"train {name}",
                train,
                control_cfg(rl_cfg, root, kind),
                resume=resume,
                overwrite=not resume,
                quiet=quiet,
                report=False,  # the main job's report compares it with RLVR
            )
        else:
            timed.read_back(f"train {name}")
        records, summary = timed(f"eval {name}", evaluate, name, str(run_dir), control_eval_cfg(cfg, kind), root, quiet)
        result = compare({name: records, "rlvr": rlvr_records}, baseline=name, metric="pass@1", seed=cfg.seed)
        write_comparison(result, root, f"compare-{name}")
        out[kind] = {"summary": summary, "compare": result}
    return out


def controls_markdown(controls: dict, plot: str | None = None) -> str:
    """Per band: each control's pass@1, RLVR's, and RLVR minus the control with its paired interval and verdict."""
    from rlvr.evaluation.stats import fmt_diff

    if not controls:
        return ""
    lines = [
        "Control runs: the same budget, seed and settings as RLVR, trained on a reward without the answer "
        "(random_rate: Bernoulli at the policy's own success rate each batch; format_only: the format term "
        "alone) or without the tools (no_tools: single-turn, a prompt without tools, evaluated so). Held-out "
        "pass@1, 95% paired bootstrap over problems:",
        "",
        "| band | control | control pass@1 | rlvr pass@1 | rlvr - control [CI] | verdict |",
        "|---|---|---|---|---|---|",
    ]
    first = next(iter(controls.values()))["compare"]
    for band in first["bands"]:
        for kind, c in controls.items():
            r, name = c["compare"], control_name(kind)
            d = r["diffs"]["rlvr"][band]
            lines.append(
                f"| {band} | {kind} | {r['accuracy'][name][band]['value']:.3f} | "
                f"{r['accuracy']['rlvr'][band]['value']:.3f} | {fmt_diff(d)} | {d['verdict']} |"
            )
    if plot:
        lines += ["", f"![training curves: RLVR and its controls]({plot})"]
    return "\n".join(lines) + "\n"


__all__ = [
    "control_name",
    "control_cfg",
    "control_eval_cfg",
    "single_turn",
    "without_tools",
    "check_controls",
    "run_controls",
    "controls_markdown",
]
