"""The main job's root folder: the configs its phases run with, and what a run into a folder that already holds a
job keeps. An interrupted phase resumes and a finished one is kept, but only under the settings it trained with
(check_finished_phases); an evaluation is read back only when it sampled as this run asks (cached_eval), so a rerun
with `--set eval.n=32` evaluates again instead of reporting n = 4 figures as n = 32 ones. PhaseClock times the
phases this invocation ran and names those it read back.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

from rlvr.config import Config, ConfigError


def phase_cfg(cfg: Config, out: Path) -> Config:
    """A phase's config: the job's (a copy: the phases change their own), writing into `out`."""
    sub = copy.deepcopy(cfg)
    sub.output_dir = str(out)
    return sub


def rl_phase_cfg(cfg: Config, root: Path) -> Config:
    """The RLVR phase's config: its run directory root/rlvr, and in the trackers the root folder's name."""
    sub = phase_cfg(cfg, root / "rlvr")
    sub.log.run_name = sub.log.run_name or root.absolute().name
    return sub


def cached_eval(out: Path, label: str, evaluate, want: dict):
    """evaluate() -> (records, summary), written into `out`. A finished one is read back instead of redone when it
    sampled as `want` says (rlvr.evaluation.run_eval.eval_setup); one that sampled otherwise (a rerun with
    eval.n=32, say) is evaluated again, and the run says so, rather than reported under settings it did not use. A
    summary read back carries "read_back": True (not saved), so the report does not count it as this invocation's
    work."""
    from rlvr.evaluation.records import read_records, write_records
    from rlvr.evaluation.summary import write_summary

    if (out / "summary.json").exists() and (out / "records.jsonl").exists():
        saved = json.loads((out / "summary.json").read_text())
        had = saved.get("setup", {})
        stale = [k for k in want if had.get(k) != want[k]]
        if not stale:
            return read_records(out / "records.jsonl"), {**saved, "read_back": True}
        print(
            f"{out}: evaluated with "
            + ", ".join(f"{k}={had.get(k)!r}" for k in stale)
            + "; this run asks "
            + ", ".join(f"{k}={want[k]!r}" for k in stale)
            + ": evaluating again"
        )
    records, summary = evaluate()
    summary["label"] = label
    write_records(records, out / "records.jsonl")
    write_summary(summary, out, "summary")
    return records, summary


class PhaseClock:
    """The main job's wall time per phase in this invocation, and the phases a rerun read back instead of redoing.

    Call it as clock(phase, fn, *args) to run and time a phase. An evaluation that cached_eval read back (its summary
    says "read_back") and a training phase reported with clock.read_back(phase) are not this invocation's work: the
    report names them, with the seconds they took when they ran where known, so a rerun that only re-reports does
    not read as a 0-minute main job."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self.earlier: dict[str, float | None] = {}

    def __call__(self, phase: str, fn, *args, **kw):
        start = time.perf_counter()
        out = fn(*args, **kw)
        summary = out[1] if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict) else {}
        if summary.pop("read_back", False):
            self.read_back(phase, summary.get("setup", {}).get("wall_s"))
        else:
            self.spent[phase] = self.spent.get(phase, 0.0) + time.perf_counter() - start
        return out

    def read_back(self, phase: str, seconds: float | None = None) -> None:
        self.earlier[phase] = seconds

    def line(self, wall: float) -> str:
        """'12.3 min (eval start 2.0, ...)', and on a rerun '... in this invocation; read back from an earlier one:
        train rlvr, eval sft (4.1 min then)'."""
        line = f"{wall / 60:.1f} min"
        if self.spent:
            line += " (" + ", ".join(f"{k} {v / 60:.1f}" for k, v in self.spent.items()) + ")"
        if not self.earlier:
            return line
        then = [k if s is None else f"{k} ({s / 60:.1f} min then)" for k, s in self.earlier.items()]
        return f"{line} in this invocation; read back from an earlier one: " + ", ".join(then)


def phase_cfgs(cfg: Config, root: Path, rl: Config) -> dict[str, Config]:
    """{"rlvr": config, "sft": config} of the two training phases as they run: RL first and SFT matched on as many
    sampled completions as RL generated; with train.init_from_sft, SFT first (on its own data, e.g. reference
    traces) and RL from its merged model (a policy that has never called a tool does not start to by RL alone)."""
    rl_dir, sft_dir = root / "rlvr", root / "sft"
    sft_cfg = phase_cfg(cfg, sft_dir)
    sft_cfg.sft.output_dir = str(sft_dir)
    if cfg.train.init_from_sft:
        sft_cfg.model.save_merged = True  # RL starts from final/merged
        return {"rlvr": from_sft(rl, sft_dir), "sft": sft_cfg}
    sft_cfg.sft.match_run = str(rl_dir)
    return {"rlvr": rl, "sft": sft_cfg}


# What may differ when a finished main job runs again into its folder: where things are, how they are logged, and how
# the models are evaluated (they are evaluated again). Anything else would report models trained under other settings.
_FREE_ON_RERUN = ("output_dir", "log.", "eval.", "sft.output_dir", "sft.match_run")


def check_finished_phases(cfg: Config, root: Path, rl: Config) -> None:
    """Refuse, before any work, a rerun whose settings differ from those a finished training phase in `root` ran
    with: the phase would be reused and reported under settings it did not train with."""
    import yaml

    from rlvr.training.lifecycle import changed_settings

    for name, planned in phase_cfgs(cfg, root, rl).items():
        phase = root / name
        if not (phase / "final" / "merged").exists() or not (phase / "config.yaml").exists():
            continue
        saved = yaml.safe_load((phase / "config.yaml").read_text())
        free: tuple[str, ...] = _FREE_ON_RERUN
        if not planned.reward.terms:
            free += ("reward.terms",)  # the task's own grader, which the phase recorded resolved
        if name == "rlvr" and cfg.train.init_from_sft:
            free += ("model.name",)  # the SFT phase's merged model, wherever the folder now is; SFT's base is checked
        changed = [k for k in changed_settings(saved, planned.to_dict()) if not k.startswith(free)]
        if changed:
            raise ConfigError(
                f"{phase} finished with other settings than this run's ({', '.join(changed)}): its model would be "
                f"reported under settings it did not train with. Pass --overwrite to train again, or choose another "
                f"--output-dir; a finished run may change only eval.*, log.* and paths (it evaluates again)."
            )


def from_sft(rl: Config, sft_dir: Path) -> Config:
    """The RL phase's config starting from the SFT phase's merged model (a fresh LoRA adapter on it)."""
    sub = copy.deepcopy(rl)
    sub.model.name = str(Path(sft_dir).absolute() / "final" / "merged")
    return sub


__all__ = [
    "phase_cfg",
    "rl_phase_cfg",
    "phase_cfgs",
    "from_sft",
    "check_finished_phases",
    "cached_eval",
    "PhaseClock",
]
