"""Out-of-domain tracking: the same models on task sets they did not train on, beside the in-domain bands.

`eval.out_of_domain` lists the sets: [{"name": task, "settings": {...}, "split": "heldout", "limit": N,
"label": "..."}]. Each set is graded by its own task's grader (not the training reward), with the in-domain
evaluation's samples per problem, temperature and seed, and compared with the start model by paired bootstrap:
a model that got worse out of domain is said so plainly.
"""

from __future__ import annotations

from rlvr.config import ConfigError

SET_KEYS = ("name", "settings", "split", "limit", "label")


def ood_sets(cfg: dict) -> list[dict]:
    """The validated out-of-domain sets of a config, each with a label (default: the task's name)."""
    out = []
    for i, spec in enumerate(cfg["eval"].get("out_of_domain") or []):
        if not isinstance(spec, dict) or "name" not in spec:
            raise ConfigError(f"eval.out_of_domain[{i}]: expected a mapping with a task name; keys: {', '.join(SET_KEYS)}")
        bad = [k for k in spec if k not in SET_KEYS]
        if bad:
            raise ConfigError(f"eval.out_of_domain[{i}].{bad[0]}: unknown key; choose from {', '.join(SET_KEYS)}")
        out.append({"settings": {}, "split": "heldout", "limit": 0, "label": spec["name"], **spec})
    labels = [s["label"] for s in out]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"eval.out_of_domain: labels must differ, got {labels} (set `label` on each)")
    return out


def evaluate_set(model, spec: dict, cfg: dict, quiet: bool):
    """(records, summary) of one model on one out-of-domain set, graded by that set's own task."""
    from rlvr.config import DEFAULTS
    from rlvr.evaluation.run_eval import evaluate_model
    from rlvr.tasks import load_task

    e = cfg["eval"]
    # contamination is checked against what the run trained on, the same for every model
    trained = load_task(cfg["task"]["name"], **cfg["task"]["settings"]).problems("train")
    return evaluate_model(
        model, spec["name"], split=spec["split"], n=e["n"], ks=e["ks"], temperature=cfg["rollout"]["temperature"],
        max_new_tokens=cfg["rollout"]["max_new_tokens"], greedy=e["greedy"], reward_cfg=DEFAULTS["reward"],
        backend=cfg["rollout"]["backend"], rollout=cfg["rollout"], seed=cfg["seed"], limit=spec["limit"] or None,
        progress=not quiet, task_settings=spec["settings"], train_problems=trained)


def worse_sentence(label: str, result: dict) -> str:
    """One plain sentence for a set: which models got worse than the start outside the noise, or none."""
    worse = [f"{m} ({', '.join(b for b, d in per.items() if d['verdict'] == 'worse')})"
             for m, per in result["diffs"].items() if any(d["verdict"] == "worse" for d in per.values())]
    better = [m for m, per in result["diffs"].items() if per.get("all", {}).get("verdict") == "better"]
    if worse:
        return f"**{label}: worse out of domain** than the start, outside the noise: {'; '.join(worse)}."
    text = f"{label}: no model worse than the start outside the noise"
    return text + (f"; better over all bands: {', '.join(better)}." if better else ".")


__all__ = ["ood_sets", "evaluate_set", "worse_sentence"]
