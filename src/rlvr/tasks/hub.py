"""A task from a hub dataset (online users), e.g. `trl-lib/DeepMath-103K`: rows with a prompt (text, or chat
messages kept whole with their system turn, as the jsonl task keeps them) and a gold answer, split into
train / validation / held-out by a hash of the prompt, banded by a difficulty column when the dataset has one.
`answer_format` (boxed or tags), `config` (the dataset's configuration name) and `demo` (a demonstration before each
question, rlvr.tasks.demo; default "none") are settings too."""

from __future__ import annotations

import hashlib

from rlvr.tasks.base import (
    SPLITS,
    DatasetError,
    Problem,
    ProblemSetTask,
    check_answer_format,
    system_prompt_for,
    validate_problem,
)
from rlvr.tasks.chat import chat_prompt


def _band(value) -> str:
    if value is None:
        return "all"
    try:  # numeric difficulty (DeepMath: 1..10) is grouped in bands of width 2
        level = float(value)
        low = int(level // 2 * 2)
        return f"difficulty {low}-{low + 2}"
    except (TypeError, ValueError):
        return str(value)


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
