"""A task from a hub dataset (online users), e.g. `trl-lib/DeepMath-103K` or `openai/gsm8k`: rows with a prompt (text,
or chat messages kept whole with their system turn) and a gold answer, read by the jsonl task's column rule
(rlvr.tasks.jsonl: `prompt` / `problem` / `question`, the gold columns, GSM8K's worked `... #### 72`; `prompt_field`,
`answer_field` and `band_field` name others), split into
train / validation / held-out by a hash of the prompt, banded by a difficulty column when the dataset has one.
`answer_format` (boxed or tags), `config` (the dataset's configuration name) and `demo` (a demonstration before each
question, rlvr.tasks.demo; default "none") are settings too. A dataset that is not a local folder is found by the
hub's rule (rlvr.tasks.hub_access, as a model is): in the hub cache, or by one request, else one line (exit 2) before
anything loads; a local data file is the jsonl task's, and is said so."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

from rlvr.errors import ConfigError
from rlvr.tasks.base import (
    REASONING_SYSTEM,
    SPLITS,
    DatasetError,
    Problem,
    ProblemSetTask,
    check_answer_format,
    system_prompt_for,
)
from rlvr.tasks.chat import check_settings_apply
from rlvr.tasks.hub_access import from_hub, looks_local
from rlvr.tasks.jsonl import Columns, row_problem

# a local data file: what the jsonl task reads (rlvr.tasks.benchmarks.LOCAL_SUFFIXES and csv: what people pass)
DATA_FILE_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")


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
    prompt_field: str | None = None,
    answer_field: str | None = None,
    band_field: str | None = None,
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
    from rlvr.tasks.arithmetic import SPLIT_BUCKETS
    from rlvr.tasks.demo import add_traces, check_demo, demo_options, resolve_demo

    check_answer_format(answer_format)
    check_demo(demo, answer_format)  # before the dataset is fetched
    check_source(dataset)
    rows = load_dataset(dataset, config, split=split) if config else load_dataset(dataset, split=split)
    if limit:
        rows = rows.select(range(min(limit, len(rows))))
    splits: dict[str, list[Problem]] = {s: [] for s in SPLITS}
    columns = Columns(prompt_field, answer_field, band_field)
    for i, row in enumerate(rows):
        read = row_problem(dict(row), f"{dataset}[{split}] row {i}", i, columns)
        # named by its question's hash, as before the column rule: a hub run's splits stay where they were. Of the
        # row's other columns only what rlvr reads is kept (DeepMath's three R1 solutions are ~30 KB a row)
        pid = "hub-" + hashlib.sha256(read.prompt.encode()).hexdigest()[:16]
        kept = {k: read.meta[k] for k in ("messages", "reasoning", "trace") if k in read.meta}
        problem = replace(read, id=pid, meta=kept)
        bucket = int(hashlib.sha256(pid.encode()).hexdigest(), 16) % 100
        splits[next(s for s, r in SPLIT_BUCKETS.items() if bucket in r)].append(problem)
    check_settings_apply([p for ps in splits.values() for p in ps], dataset, demo, system_prompt)
    # "none" by default: a hub run's prompts stay as they were
    add_traces((p for ps in splits.values() for p in ps), answer_format)
    train_all = splits["train"]
    turns, splits = resolve_demo(demo, splits, answer_format)
    task = ProblemSetTask(
        dataset,
        splits,
        system_prompt_for(answer_format, system_prompt, REASONING_SYSTEM),
        answer_form=answer_form,
        demo=turns,
        answer_format=answer_format,
    )
    task.demo_options = demo_options(demo, turns)  # "auto": measured on the start model (rlvr.evaluation.demo_choice)
    task._train_all = train_all
    return task
