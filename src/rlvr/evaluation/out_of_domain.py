"""Out-of-domain tracking: the same models on task sets they did not train on, beside the in-domain bands.

`eval.out_of_domain` lists the sets: [{"name": task, "settings": {...}, "split": "heldout", "limit": N,
"label": "..."}]. Each set is graded by its own task's grader (not the training reward), with the in-domain
evaluation's samples per problem, temperature and seed, and compared with the start model by paired bootstrap:
a model that got worse out of domain is said so plainly.
"""

from __future__ import annotations

import re

from rlvr.config import Config, ConfigError, RewardConfig

SET_KEYS = ("name", "settings", "split", "limit", "label")


def ood_sets(cfg: Config) -> list[dict]:
    """The validated out-of-domain sets of a config, each with a label (default: the task's name)."""
    out = []
    for i, spec in enumerate(cfg.eval.out_of_domain or []):
        if not isinstance(spec, dict) or "name" not in spec:
            raise ConfigError(
                f"eval.out_of_domain[{i}]: expected a mapping with a task name; keys: {', '.join(SET_KEYS)}"
            )
        bad = [k for k in spec if k not in SET_KEYS]
        if bad:
            raise ConfigError(f"eval.out_of_domain[{i}].{bad[0]}: unknown key; choose from {', '.join(SET_KEYS)}")
        out.append({"settings": {}, "split": "heldout", "limit": 0, "label": spec["name"], **spec})
    labels = [s["label"] for s in out]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"eval.out_of_domain: labels must differ, got {labels} (set `label` on each)")
    return out


def check_sets(cfg: Config) -> None:
    """Every out-of-domain set loads (its task, settings, split) before anything is trained."""
    from rlvr.tasks import load_task

    for spec in ood_sets(cfg):
        try:
            problems = load_task(spec["name"], **spec["settings"]).problems(spec["split"])
        except ValueError as e:
            raise ConfigError(f"eval.out_of_domain {spec['label']!r}: {e}") from None
        if not problems:
            raise ConfigError(f"eval.out_of_domain {spec['label']!r}: split {spec['split']!r} has no problems")


def folder_name(spec: dict) -> str:
    """Where a set's evaluations go: ood-<label> with anything but word characters, dots and dashes as _."""
    return "ood-" + re.sub(r"[^\w.-]+", "_", spec["label"])


def trained_problems(cfg: Config) -> list:
    """What the run trained on: every set's contamination is checked against it, the same for every model."""
    from rlvr.tasks import load_task

    return load_task(cfg.task.name, **cfg.task.settings).problems("train")


def set_settings(spec: dict, cfg: Config, quiet: bool = False):
    """The run's evaluation settings on one out-of-domain set: its split and limit."""
    from rlvr.evaluation.run_eval import config_settings

    return config_settings(cfg, quiet, split=spec["split"], limit=spec["limit"])


def set_setup(spec: dict, cfg: Config) -> dict:
    """What an evaluation on the set records of how it sampled (run_eval.eval_setup), to check a saved one against."""
    from rlvr.evaluation.run_eval import eval_setup

    settings = set_settings(spec, cfg)
    return eval_setup(settings, spec["settings"], settings.backend)


def evaluate_set(model, spec: dict, cfg: Config, quiet: bool, trained: list):
    """(records, summary) of one model on one out-of-domain set, graded by that set's own task (the default reward:
    the task's own grader, not the run's reward), with the run's evaluation settings and sampler; a run directory's
    model in its own episode section, every model in the run's prompt format; `trained` from trained_problems(cfg)."""
    from dataclasses import replace

    from rlvr.evaluation.run_eval import eval_config, evaluate_model

    base = eval_config(model)
    own = replace(
        base,
        reward=RewardConfig(),
        rollout=cfg.rollout,
        model=replace(base.model, prompt_format=cfg.model.prompt_format),  # the start model's too
    )
    return evaluate_model(
        model,
        spec["name"],
        set_settings(spec, cfg, quiet),
        cfg=own,
        task_settings=spec["settings"],
        train_problems=trained,
    )


def worse_sentence(label: str, result: dict) -> str:
    """One plain sentence for a set: which models got worse than the start outside the noise, or none."""
    worse = [
        f"{m} ({', '.join(b for b, d in per.items() if d['verdict'] == 'worse')})"
        for m, per in result["diffs"].items()
        if any(d["verdict"] == "worse" for d in per.values())
    ]
    better = [m for m, per in result["diffs"].items() if per.get("all", {}).get("verdict") == "better"]
    if worse:
        return f"**{label}: worse out of domain** than the start, outside the noise: {'; '.join(worse)}."
    text = f"{label}: no model worse than the start outside the noise"
    return text + (f"; better over all bands: {', '.join(better)}." if better else ".")


__all__ = [
    "ood_sets",
    "check_sets",
    "folder_name",
    "trained_problems",
    "evaluate_set",
    "set_settings",
    "set_setup",
    "worse_sentence",
]
