"""A task from a hub dataset (online users), e.g. `trl-lib/DeepMath-103K`: rows with a prompt (text, or chat
messages kept whole with their system turn, as the jsonl task keeps them) and a gold answer, split into
train / validation / held-out by a hash of the prompt, banded by a difficulty column when the dataset has one.
`answer_format` (boxed or tags), `config` (the dataset's configuration name) and `demo` (a demonstration before each
question, rlvr.tasks.demo; default "none") are settings too. A dataset that is not a local folder is found by the
hub's rule (rlvr.tasks.hub_access, as a model is): in the hub cache, or by one request, else one line (exit 2) before
anything loads; a local data file is the jsonl task's, and is said so."""

from __future__ import annotations

import hashlib
from pathlib import Path

from rlvr.errors import ConfigError
from rlvr.tasks.base import (
    SPLITS,
    DatasetError,
    Problem,
    ProblemSetTask,
    check_answer_format,
    system_prompt_for,
    validate_problem,
)
from rlvr.tasks.chat import chat_prompt, check_settings_apply
from rlvr.tasks.hub_access import from_hub, looks_local

# a local data file: what the jsonl task reads (rlvr.tasks.benchmarks.LOCAL_SUFFIXES and csv: what people pass)
DATA_FILE_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")


def _band(value) -> str:
    if value is None:
        return "all"
    try:  # numeric difficulty (DeepMath: 1..10) is grouped in bands of width 2
        level = float(value)
        low = int(level // 2 * 2)
        return f"difficulty {low}-{low + 2}"
    except (TypeError, ValueError):
        return str(value)


def check_source(dataset: str) -> None:
    """A local folder passes as it is (datasets reads it); a data file, or a path that is not there, is one line; a hub
    id must be in the hub cache or found by one request (rlvr.tasks.hub_access): datasets would retry for ~25 s and
    end in a ConnectionError traceback."""
    path = Path(dataset).expanduser()
    if path.is_dir():
        return
    if path.is_file() or path.suffix.lower() in DATA_FILE_SUFFIXES:
        state = "a file" if path.is_file() else "no such file"
        raise ConfigError(
            f"task.settings.dataset: {dataset!r} is {state}; the hub task reads a hub id or a dataset folder, the "
            f"jsonl task a JSON-lines file (task.name: jsonl, task.settings.path: {dataset})"
        )
    if looks_local(dataset):
        raise ConfigError(f"task.settings.dataset: {dataset!r}: no such folder, and not a hub id (org/name)")
    from_hub(dataset, "dataset", "a local JSON-lines file (task.name: jsonl), which needs no hub")


def load_hub_task(
    dataset: str,
    split: str = "train",
    prompt_field: str = "prompt",
    answer_field: str = "solution",
    band_field: str | None = "difficulty",
    limit: int | None = None,
    system_prompt: str | None = None,
    answer_form: str = "math",
    answer_format: str = "boxed",
    config: str | None = None,
    demo="none",
):
    try:
        from datasets import load_dataset
    except ImportError:
        raise DatasetError(f"hub task {dataset!r} needs the datasets package: pip install datasets") from None
    from rlvr.tasks.arithmetic import DEFAULT_SYSTEM, SPLIT_BUCKETS
    from rlvr.tasks.demo import check_demo, resolve_demo

    check_answer_format(answer_format)
    check_demo(demo, answer_format)  # before the dataset is fetched
    check_source(dataset)
    rows = load_dataset(dataset, config, split=split) if config else load_dataset(dataset, split=split)
    if limit:
        rows = rows.select(range(min(limit, len(rows))))
    splits: dict[str, list[Problem]] = {s: [] for s in SPLITS}
    for i, row in enumerate(rows):
        text, messages = chat_prompt(row.get(prompt_field), f"{dataset}[{split}] row {i}")
        pid = "hub-" + hashlib.sha256(text.encode()).hexdigest()[:16]
        problem = validate_problem(
            Problem(
                id=pid,
                prompt=text,
                answer=str(row.get(answer_field) or ""),
                band=_band(row.get(band_field) if band_field else None),
                meta={"messages": messages} if messages else {},
            ),
            f"{dataset}[{split}]",
            i,
        )
        bucket = int(hashlib.sha256(pid.encode()).hexdigest(), 16) % 100
        splits[next(s for s, r in SPLIT_BUCKETS.items() if bucket in r)].append(problem)
    check_settings_apply([p for ps in splits.values() for p in ps], dataset, demo, system_prompt)
    # "none" by default: a hub run's prompts stay as they were
    turns, splits = resolve_demo(demo, splits, answer_format)
    task = ProblemSetTask(
        dataset,
        splits,
        system_prompt_for(answer_format, system_prompt, DEFAULT_SYSTEM),
        answer_form=answer_form,
        demo=turns,
        answer_format=answer_format,
    )
    return task
