"""The main job's control runs (`rlvr run --controls`, eval.controls): RL under a reward that carries no answer.

Each control is an RL run with the RLVR run's budget, seed and settings, its reward replaced by
rlvr.verifiers.controls (reward.control: "random_rate" or "format_only"), in root/control-<kind>. It is evaluated
on the same held-out problems, and the report shows RLVR minus each control per band (paired bootstrap over
problems) and the training curves side by side. A gain that survives the controls is not explained by the format
reward, or by any reward paid at the policy's own success rate.
"""

from __future__ import annotations

import copy
from pathlib import Path


def control_name(kind: str) -> str:
    return f"control-{kind}"


def control_cfg(rl_cfg: dict, root: Path, kind: str) -> dict:
    """The RLVR phase's config with the control's reward, run directory root/control-<kind> and tracker name."""
    sub = copy.deepcopy(rl_cfg)
    sub["output_dir"] = str(Path(root) / control_name(kind))
    sub["reward"]["control"] = kind
    sub["log"]["run_name"] = f"{rl_cfg['log']['run_name'] or Path(root).absolute().name}-{control_name(kind)}"
    return sub


def check_controls(cfg: dict, root: Path, rl_cfg: dict) -> None:
    """Build each control's components before any phase runs: a control that cannot apply (format_only on a reward
    without a format term) stops the main job at the start (ConfigError), not after the RLVR phase."""
    from rlvr.training.step import check_components

    for kind in cfg["eval"]["controls"]:
        check_components(control_cfg(rl_cfg, root, kind))


def run_controls(cfg: dict, root: Path, rl_cfg: dict, rlvr_records, *, train, evaluate, timed, quiet: bool) -> dict:
    """Train (unless finished) and evaluate every control of eval.controls; compare RLVR against each.
    `train` is rlvr.training.loop.train, `evaluate(name, model, cfg, root, quiet) -> (records, summary)` the main
    job's held-out evaluation, `timed(phase, fn, ...)` its timer. Returns {kind: {"summary", "compare"}}."""
    from rlvr.evaluation.compare import compare, write_comparison

    out = {}
    for kind in cfg["eval"]["controls"]:
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
            )
        records, summary = timed(f"eval {name}", evaluate, name, str(run_dir), cfg, root, quiet)
        result = compare({name: records, "rlvr": rlvr_records}, baseline=name, metric="pass@1", seed=cfg["seed"])
        write_comparison(result, root, f"compare-{name}")
        out[kind] = {"summary": summary, "compare": result}
    return out


def controls_markdown(controls: dict, plot: str | None = None) -> str:
    """Per band: each control's pass@1, RLVR's, and RLVR minus the control with its paired interval and verdict."""
    if not controls:
        return ""
    lines = [
        "Control runs: the same budget, seed and settings as RLVR, trained on a reward without the answer "
        "(random_rate: Bernoulli at the policy's own success rate each batch; format_only: the format term "
        "alone). Held-out pass@1, 95% paired bootstrap over problems:",
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
                f"{r['accuracy']['rlvr'][band]['value']:.3f} | {d['diff']:+.3f} [{d['lo']:+.3f}, "
                f"{d['hi']:+.3f}] | {d['verdict']} |"
            )
    if plot:
        lines += ["", f"![training curves: RLVR and its controls]({plot})"]
    return "\n".join(lines) + "\n"


__all__ = ["control_name", "control_cfg", "check_controls", "run_controls", "controls_markdown"]
