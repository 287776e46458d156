"""The main job's report section "Settings for this model": what `demo: auto` chose on the start model, and every
setting that differs from the embedded default's preset, with why where rlvr chose it (`rlvr run --model` takes
presets/reasoning.yaml, tuned to a model that reasons)."""

from __future__ import annotations

import json
from pathlib import Path

from rlvr.config import Config

# Why a setting of presets/reasoning.yaml (`rlvr run --model`) differs from the embedded default's: the report says it
OWN_MODEL_WHY = {
    "model.name": "your model",
    "rollout.max_new_tokens": "room for a chain of thought (the default fits the 135M's one-line answer)",
    "algorithm.overlong": "a completion cut at the budget leaves the loss: unfinished, not wrong",
    "rollout.prompts_per_step": "each completion is a few hundred tokens: a step of 32 is already long on a CPU",
    "train.time_budget_min": "steps of a larger model with longer completions take minutes each",
    "train.micro_batch_size": "longer rows",
    "train.micro_batch_tokens": "longer rows: a 512-token cap would put each one alone in its micro-batch",
    "task.settings.one_shot": "the solved exchange measured on the model (demo auto), not assumed",
    "log.checkpoint_every": "longer steps",
    "log.eval_problems": "validation costs a chain of thought per problem",
}


def chosen_section(root: Path, c: Config) -> dict[str, str]:
    """The report's "Settings for this model" section: demo auto's measured choice, and every setting that differs from
    the embedded default's preset (what `rlvr run --model` chose, or a config's own), with why where rlvr chose it."""
    from rlvr.config import resolve
    from rlvr.evaluation.demo_choice import DEMO_FILE, choice_markdown
    from rlvr.training.lifecycle import config_diff

    parts = []
    if (root / DEMO_FILE).exists():
        parts += [choice_markdown(json.loads((root / DEMO_FILE).read_text())), ""]
    default, ours = resolve("default"), c.to_dict()
    changed = [
        k
        for k in sorted(config_diff(default, ours))
        if k == "task.settings.one_shot" or not k.startswith(("output_dir", "eval.", "task.settings."))
    ]
    if changed:
        parts += ["| setting | embedded default | this run | why |", "|---|---|---|---|"]
        for key in changed:
            why = OWN_MODEL_WHY.get(key, "as configured")
            parts.append(f"| `{key}` | {_dotted(default, key)!r} | {_dotted(ours, key)!r} | {why} |")
    return {"Settings for this model": "\n".join(parts) + "\n"} if parts else {}


def _dotted(cfg: dict, key: str):
    """The value at a dotted key of a nested config dict, None where there is none."""
    value: object = cfg
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value
