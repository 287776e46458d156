"""A recipe's dataset keys -> rlvr's task: a hub id or dataset folder -> the hub task (gold in `solution`), a local
JSON-lines file -> the jsonl task; another local file is refused (the hub task would send its path to the hub). Part
of rlvr.integrations.trl_recipe."""

from __future__ import annotations

from pathlib import Path

from rlvr.config import ConfigError
from rlvr.integrations.conversion import Conversion
from rlvr.tasks.base import GOLD_COLUMNS
from rlvr.tasks.hub import DATA_FILE_SUFFIXES
from rlvr.tasks.jsonl import PROMPT_COLUMNS


def map_task(r: dict, conv: Conversion, open_r1: bool) -> set:
    """dataset_name (+ config, split, prompt column, system prompt) -> the hub task, gold in `solution`; a local
    JSON-lines file -> the jsonl task."""
    keys = {
        "dataset_name",
        "dataset_config",
        "dataset_configs",
        "dataset_train_split",
        "dataset_prompt_column",
        "system_prompt",
        "dataset_streaming",
    }
    if "dataset_name" not in r:
        if "system_prompt" in r:
            conv.set("task.settings.system_prompt", r["system_prompt"])
        return keys - {"dataset_name"}
    prompt_field = r.get("dataset_prompt_column", "problem" if open_r1 else "prompt")
    if _local_file(str(r["dataset_name"])):
        return _jsonl_task(r, conv, prompt_field) | keys
    settings = {
        "dataset": r["dataset_name"],
        "split": r.get("dataset_train_split", "train"),
        "prompt_field": prompt_field,
        "answer_field": "solution",
    }
    configs = r.get("dataset_config") or r.get("dataset_configs")
    if isinstance(configs, list):
        if len(configs) > 1:
            conv.unmapped.append(("dataset_configs", f"{configs}: rlvr's hub task reads one dataset config"))
        configs = configs[0] if configs else None
    if configs:
        settings["config"] = str(configs)
    if r.get("system_prompt"):
        settings["system_prompt"] = r["system_prompt"]
    conv.set("task.name", "hub")
    conv.config["task"]["settings"] = {**conv.get("task.settings", {}), **settings}
    conv.notes.append(
        f"dataset {r['dataset_name']} -> task hub (prompt column {settings['prompt_field']!r}, gold "
        f"column 'solution'; train / validation / held-out split by id hash)"
    )
    if r.get("dataset_streaming"):
        conv.unmapped.append(("dataset_streaming", "rlvr's hub task loads the split whole"))
    return keys


def _local_file(name: str) -> bool:
    """Whether dataset_name is a file here (or written as one: a data file's suffix), not a hub id or a folder."""
    path = Path(name).expanduser()
    return path.is_file() or (not path.is_dir() and path.suffix.lower() in DATA_FILE_SUFFIXES)


def _jsonl_task(r: dict, conv: Conversion, prompt_field: str) -> set:
    """A local JSON-lines file -> the jsonl task (its prompt in `prompt`, `problem` or `question`, the gold in the first of the
    gold columns); other local files are refused: the hub task would send their path to the hub."""
    name = str(r["dataset_name"])
    if not name.lower().endswith(".jsonl"):
        raise ConfigError(
            f"recipe key dataset_name: {name!r} is a local file that is not JSON lines; rlvr reads local data with "
            "the jsonl task: write the rows as .jsonl (one object a line), or give a hub id"
        )
    conv.set("task.name", "jsonl")
    conv.config["task"]["settings"] = {**conv.get("task.settings", {}), "path": name}
    if r.get("system_prompt"):
        conv.set("task.settings.system_prompt", r["system_prompt"])
    conv.notes.append(
        f"dataset {name} is a local file -> task jsonl (prompt column {' or '.join(PROMPT_COLUMNS)}, gold column "
        f"the first of {', '.join(GOLD_COLUMNS)}; train / validation / held-out split by id hash; "
        "task.settings.demo: auto, a solved problem shown first where the start model answers better with it; none "
        "shows the rows as TRL does)"
    )
    if prompt_field not in PROMPT_COLUMNS:  # a column of the data's own: the jsonl task's setting names it
        conv.set("task.settings.prompt_field", prompt_field)
    for key in ("dataset_config", "dataset_configs", "dataset_streaming"):
        if r.get(key):
            conv.unmapped.append((key, "a local file has no configs and is read whole"))
    if r.get("dataset_train_split", "train") != "train":
        conv.unmapped.append(("dataset_train_split", "a local file is one split, cut by id hash"))
    return set()


__all__ = ["map_task"]
