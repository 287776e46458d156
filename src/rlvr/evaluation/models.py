"""What `rlvr eval` can be pointed at, loaded as a model to sample from: an embedded name, a local folder or hub id;
a run directory (its final/merged model, or its adapter on its base where it saved no merged model); one of a run's
checkpoints (the run's model at that step); a PEFT adapter folder (merged into the base it names). A run supplies
its own task settings, reward and training split (for the contamination check)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import torch

from rlvr.config import Config


def is_run_dir(path) -> bool:
    if not isinstance(path, (str, os.PathLike)):  # an in-memory (model, tokenizer) pair
        return False
    p = Path(path)
    return p.is_dir() and (p / "config.yaml").exists()


def read_run(path) -> tuple[Path | None, Config]:
    """(final/merged folder, resolved config) of a training or SFT run directory; the folder is None for a run
    saved without its merged model (model.save_merged: false), which is evaluated as its adapter on its model."""
    path = Path(path)
    merged = path / "final" / "merged"
    if not (merged / "config.json").exists() and (path / "final" / "adapter" / "adapter_config.json").exists():
        return None, _config_of_run(path)  # model.save_merged: false: the adapter on the run's model (resolve_model)
    if not (merged / "config.json").exists():
        raise FileNotFoundError(
            f"{path} is a run directory without a final model ({merged} is missing); is it still training?"
        )
    return merged, _config_of_run(path)


def is_checkpoint_dir(path) -> bool:
    """A checkpoint of a run (RUN/checkpoints/step-N): evaluated as the run's model at that step."""
    if not isinstance(path, (str, os.PathLike)):
        return False
    p = Path(path)
    return (p / "trainable.safetensors").exists() and p.parent.name == "checkpoints" and is_run_dir(p.parent.parent)


def is_adapter_dir(path) -> bool:
    """A PEFT adapter folder (adapter_config.json naming its base model), such as TRL's or rlvr's final/adapter."""
    if not isinstance(path, (str, os.PathLike)):
        return False
    p = Path(path)
    return (p / "adapter_config.json").exists() and not (p / "config.json").exists()


def not_a_model(path) -> str | None:
    """Why a folder `rlvr eval --model` was given is none of the things it evaluates, naming what the folder is and
    what to pass instead, for a run's checkpoints/ or final/ folder and for evaluations (records.jsonl, summary.json,
    or a folder of them); None otherwise (rlvr.policy.load says why any other folder without config.json is not a
    model)."""
    if not isinstance(path, (str, os.PathLike)) or not Path(path).is_dir() or (Path(path) / "config.json").exists():
        return None
    p = Path(path)
    if is_run_dir(p.parent) and p.name == "final":
        return f"the final folder of the run {p.parent}; pass the run folder, {p.parent} (its task and reward come too)"
    if is_run_dir(p.parent) and p.name == "checkpoints":
        steps = sorted(
            (c for c in p.iterdir() if re.fullmatch(r"step-\d+", c.name) and is_checkpoint_dir(c)),
            key=lambda c: int(c.name[5:]),
        )
        one = f"one of them ({steps[-1]}, the newest) or " if steps else ""
        return f"the checkpoints folder of the run {p.parent}; pass {one}the run folder {p.parent} (its final model)"
    return _evaluations(p)


def _evaluations(p: Path) -> str | None:
    """not_a_model for an evaluation's output folder, or a folder of them (docs/your-data.md's runs/mine-eval)."""
    evals = [f for f in (p, *sorted(p.iterdir())) if f.is_dir() and (f / "summary.json").is_file()]
    if not evals:
        return None
    models = []
    for f in evals:
        try:
            model = json.loads((f / "summary.json").read_text()).get("setup", {}).get("model")
        except (OSError, ValueError, AttributeError):
            model = None
        if model and str(model) not in models:
            models.append(str(model))
    which = f" ({', '.join(models)})" if models else ""
    if evals[0] == p:
        return (
            f"an evaluation's output folder (records.jsonl, summary.json), not a model; pass the model it "
            f"evaluated{which}, or compare evaluations with rlvr compare NAME=FOLDER/records.jsonl ..."
        )
    pairs = " ".join(f"{f.name}={f / 'records.jsonl'}" for f in evals)
    return (
        f"a folder of evaluations ({', '.join(f.name for f in evals)}), not a model; pass a model they "
        f"evaluated{which}, or compare them: rlvr compare {pairs}"
    )


def _config_of_run(path) -> Config:
    """run_config of what is known to be a run directory or a checkpoint of one."""
    cfg = run_config(path)
    if cfg is None:
        raise FileNotFoundError(f"{path}: no config.yaml (not a run directory or a checkpoint of one)")
    return cfg


def run_config(path) -> Config | None:
    """The resolved config of a run directory, or of the run a checkpoint belongs to; None for anything else."""
    from rlvr.rundir.files import read_config

    if is_checkpoint_dir(path):
        path = Path(path).parent.parent
    elif not is_run_dir(path):
        return None
    return read_config(path)


def checkpoint_policy(path, c: Config):
    """(model, tokenizer) of a run at one of its checkpoints: the run's model and LoRA adapter (policy.build.
    with_adapter), the checkpoint's trainable tensors copied in, the adapter merged as the run's final model is
    (policy.load.merged_copy). Where the trainer stored the frozen base in bf16 (policy.fastpath.stores_base_in_bf16)
    the base is rounded the same way first: the last checkpoint then gives the run's final/merged weights exactly."""
    from rlvr.policy.build import with_adapter
    from rlvr.policy.fastpath import stores_base_in_bf16
    from rlvr.policy.load import cast_frozen_base, load_policy, merged_copy
    from rlvr.rundir.checkpoint import load_trainable

    model, tokenizer = load_policy(c.model.name, c.model.dtype)
    model = with_adapter(model, c)
    if c.model.lora.enabled and stores_base_in_bf16(c.train):
        cast_frozen_base(model, torch.bfloat16)
    load_trainable(Path(path), model)
    return (merged_copy(model) if c.model.lora.enabled else model), tokenizer


def adapter_policy(path):
    """(model, tokenizer) of a PEFT adapter folder: its base model (an embedded name, folder or hub id, as
    adapter_config.json names it) with the adapter merged."""
    from peft import PeftModel

    from rlvr.policy.load import load_policy, peft_quietly

    base = json.loads((Path(path) / "adapter_config.json").read_text()).get("base_model_name_or_path")
    if not base:
        raise ValueError(f"{path}/adapter_config.json names no base_model_name_or_path")
    model, tokenizer = load_policy(base, "float32")
    with peft_quietly():
        return PeftModel.from_pretrained(model, str(path)).merge_and_unload(), tokenizer


def run_as_adapter(path, cfg: Config):
    """(model, tokenizer) of a run directory (its resolved config `cfg`) as its base model plus its final LoRA
    adapter (peft), for the remote backend, whose servers hold the base model and take the policy as an adapter."""
    from peft import PeftModel

    from rlvr.policy.load import load_policy, peft_quietly

    path = Path(path)
    if not (path / "final" / "adapter" / "adapter_config.json").exists():
        raise ValueError(
            f"{path} has no final/adapter (trained without LoRA?): the remote backend samples a run as "
            f"an adapter on the servers' base model; evaluate it with a local backend"
        )
    model, tokenizer = load_policy(cfg.model.name, "float32")
    with peft_quietly():
        return PeftModel.from_pretrained(model, str(path / "final" / "adapter")), tokenizer


def resolve_model(model_or_path, task, task_settings: dict | None, as_adapter: bool = False):
    """Returns (model, tokenizer, task object, task settings, training problems or None, label).

    A run directory (or checkpoint) supplies its task settings when `task` is its task's name (or None); its training
    split is returned for the contamination check. `as_adapter`: a run directory is loaded
    as its base model plus its adapter (run_as_adapter) instead of its merged model."""
    from rlvr.policy.load import ModelUnavailable, load_policy, merged_copy

    settings = dict(task_settings or {})
    run_train = None
    # every refusal of the data (columns, golds, splits) before a model is converted or loaded: a task first
    if isinstance(model_or_path, tuple):
        (model, tokenizer), label = model_or_path, "in-memory model"
        task_obj = _task(task, settings)
    elif is_run_dir(model_or_path):
        merged, cfg = read_run(model_or_path)
        task, settings, run_train = _as_run(cfg, task, settings)
        task_obj = _task(task, settings)
        if as_adapter or merged is None:
            model, tokenizer = run_as_adapter(model_or_path, cfg)
            model = model if as_adapter else merged_copy(model)
        else:
            model, tokenizer = load_policy(str(merged), "float32")
        label = str(model_or_path)
    elif is_checkpoint_dir(model_or_path):
        cfg = _config_of_run(model_or_path)
        task, settings, run_train = _as_run(cfg, task, settings)
        task_obj = _task(task, settings)
        model, tokenizer = checkpoint_policy(model_or_path, cfg)
        label = str(model_or_path)
    else:
        why = not_a_model(model_or_path)
        if why:  # before transformers, which would blame a missing tokenizer library
            raise ModelUnavailable(f"model {str(model_or_path)!r}: {why}")
        task_obj = _task(task, settings)
        model, tokenizer = (
            adapter_policy(model_or_path)
            if is_adapter_dir(model_or_path)
            else load_policy(str(model_or_path), "float32")
        )
        label = str(model_or_path)
    return model, tokenizer, task_obj, settings, run_train, label


def _task(task, settings: dict):
    """The task object of a name (with its settings) or the object itself; None is a ValueError (only a run directory
    records its own task)."""
    from rlvr.tasks import load_task

    if task is None:
        raise ValueError("no task given (only a run directory records its own)")
    return load_task(task, **settings) if isinstance(task, str) else task


def _as_run(cfg: Config, task, settings: dict):
    """(task, settings, training problems) of a model that a run trained: when the task is the run's own (or not
    given), its task settings; its training split for the contamination check."""
    from rlvr.tasks import load_task

    run_train = load_task(cfg.task.name, **cfg.task.settings).problems("train")
    if task is None or task == cfg.task.name:
        task, settings = cfg.task.name, {**cfg.task.settings, **settings}
    return task, settings, run_train


__all__ = [
    "is_run_dir",
    "read_run",
    "is_checkpoint_dir",
    "is_adapter_dir",
    "not_a_model",
    "run_config",
    "checkpoint_policy",
    "adapter_policy",
    "run_as_adapter",
    "resolve_model",
]
