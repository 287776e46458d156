"""Validated configuration: a wrong key names itself and the allowed keys; presets are data.

A config is DEFAULTS, then a YAML file (or a named preset), then `--set key=value` overrides, each
checked against DEFAULTS: every key must exist there and every value must have the default's type.
Sections listed in OPEN_KEYS hold free-form settings checked by the component that reads them.
"""

from __future__ import annotations

import copy
from importlib import resources
from pathlib import Path
from types import SimpleNamespace

import yaml


class ConfigError(ValueError):
    """A configuration mistake; the message is one line naming the key, the value and the choices."""


DEFAULTS: dict = {
    "seed": 0,
    "output_dir": "runs/train",
    "model": {
        "name": "smollm2-135m-instruct",  # embedded GGUF default, a local folder, or a hub id
        "dtype": "float32",                 # master weights; compute may autocast (train.autocast)
        "lora": {"enabled": True, "r": 16, "alpha": 32, "dropout": 0.0, "target_modules": "all-linear"},
    },
    "task": {"name": "arithmetic", "settings": {}},
    "reward": {
        "terms": [
            {"name": "correct", "kind": "math", "weight": 1.0},
            {"name": "format", "kind": "boxed_format", "weight": 0.1},
        ],
        "allow_dominant_shaping": False,
        "workers": 2,
        "timeout_s": 5.0,
        "engine": "local",  # where verification runs when workers > 0: local processes, or "ray" (optional extra)
    },
    "algorithm": {"preset": "grpo"},  # a preset name plus any field overrides, checked by rlvr.algorithms
    # Prompt selection by difficulty band: {} draws uniformly from the train split; otherwise
    # {"kind": "fixed" | "schedule" | "adaptive", ...} as rlvr.prompts.curriculum.build_curriculum reads it.
    "curriculum": {},
    "rollout": {
        "backend": "hf",
        "prompts_per_step": 4,   # P
        "group_size": 8,         # G
        "max_new_tokens": 128,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": 0,
        "dtype": "bfloat16",     # local samplers' compute dtype; "float32" is the reference path (docs/performance.md)
        # backend "remote" only (rlvr.sampling.remote, docs/scaling.md): vLLM server addresses, and a folder
        # every server can read the pushed LoRA adapters from ("" = a temporary folder on this machine)
        "urls": [],
        "adapter_dir": "",
        # backend "vllm" only (rlvr.sampling.vllm, docs/performance.md): vLLM's engine on the trainer's GPU.
        # gpu_memory_utilization: the fraction of the GPU vLLM takes (the trainer needs the rest); dtype: the
        # engine's weights; max_model_len 0 = the model's own; weight_sync: "full" (merged weights each step)
        # or "lora" (the adapter, applied by vLLM)
        "vllm": {"gpu_memory_utilization": 0.3, "dtype": "bfloat16", "enforce_eager": False, "max_model_len": 0,
                 "weight_sync": "full"},
    },
    "train": {
        "steps": 20,
        "lr": 1e-5,
        "lr_schedule": "constant",
        "warmup_steps": 0,
        "weight_decay": 0.0,
        "max_grad_norm": 1.0,
        # at most this many rows, and (if > 0) this many completion tokens counting padding, a forward/backward:
        # they bound the update's memory. Rows are sorted by length across groups and cut where padding would
        # cost more than another chunk (rlvr.policy.update.micro_batches); a row longer than the token cap goes alone.
        "micro_batch_size": 8,
        "micro_batch_tokens": 0,
        "updates_per_batch": 1,  # mu: optimisation passes over each rollout batch
        "autocast": "none",
        # attention in the update: "auto" = rlvr's CPU kernel on the CPU (rlvr.policy.attention), the model's own on a
        # GPU; "rlvr"; "model" = whatever the model was loaded with (sdpa)
        "attention": "auto",
        # recompute each decoder layer's activations in the backward instead of keeping them: a third to a half
        # more update time for a fraction of its memory (docs/performance.md has both)
        "gradient_checkpointing": False,
        "time_budget_min": 0.0,  # stop (and save) after this many minutes of training; 0 = no limit
        # shard the policy over the ranks with torch's FSDP2 (models that do not fit one device); a no-op on one
        # rank. Pair it with rollout.backend: remote (a local sampler holds the whole model). docs/scaling.md
        "fsdp": False,
    },
    # Held-out evaluation in the main job (rlvr run): the same split, samples per problem and verifier for
    # every model compared. limit = problems per split (spread over bands); 0 = all.
    "eval": {"split": "heldout", "n": 4, "ks": [1, 4], "limit": 0, "greedy": True},
    "log": {
        "samples_every": 5,
        "checkpoint_every": 10,
        "keep_checkpoints": 2,
        "eval_every": 0,      # greedy accuracy on validation problems every N steps (0 = never)
        "eval_problems": 60,  # how many validation problems (spread over the bands)
    },
    # The supervised baseline (`rlvr sft`, rlvr.training.sft), read with the sections above: same model, LoRA, task,
    # reward, rollout settings and seed, so that it differs from the RL run only in how it learns.
    "sft": {
        "source": "samples",         # "samples": rejection sampling from the starting model; "reference": dataset traces
        "samples": 0,                # completions to sample; 0 = as many as the RL run samples (steps x P x G)
        "match_run": "",             # an RL run directory: sample as many completions as its metrics.jsonl generated
        "group_size": 0,             # samples per training prompt; 0 = rollout.group_size
        "reference_field": "trace",  # source "reference": the dataset column holding a worked solution
        "epochs": 2,                 # passes over the kept completions
        "batch_size": 8,             # completions per optimizer step (micro-batched by train.micro_batch_size)
        "lr": 1e-4,                  # supervised LoRA fine-tuning wants a larger step than the RL update
        "output_dir": "",            # "" = <output_dir>-sft, so one config gives the RL and SFT runs side by side
    },
}
# Values that are dicts/lists read by another component (which validates them itself).
OPEN_KEYS = {"task.settings", "reward.terms", "algorithm", "curriculum", "model.lora.target_modules"}
CHOICES = {
    "model.dtype": ("float32", "bfloat16", "float16"),
    "train.lr_schedule": ("constant", "cosine"),
    "train.autocast": ("none", "bfloat16"),
    "train.attention": ("auto", "rlvr", "model"),
    "rollout.backend": ("hf", "fast", "remote", "vllm"),
    "rollout.dtype": ("bfloat16", "float32"),
    "rollout.vllm.dtype": ("bfloat16", "float16", "float32", "auto"),
    "rollout.vllm.weight_sync": ("full", "lora"),
    "reward.engine": ("local", "ray"),
    "sft.source": ("samples", "reference"),
}


def _type_ok(value, default) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    return isinstance(value, type(default))


def merge(base: dict, update: dict, prefix: str = "") -> dict:
    """Merge `update` into a copy of `base`, refusing unknown keys and wrong types."""
    out = copy.deepcopy(base)
    for key, value in update.items():
        path = f"{prefix}{key}"
        if key not in base:
            allowed = ", ".join(sorted(base))
            where = f"in '{prefix[:-1]}'" if prefix else "at the top level"
            raise ConfigError(f"unknown config key '{path}'; allowed keys {where}: {allowed}")
        default = base[key]
        if path in OPEN_KEYS:
            out[key] = copy.deepcopy(value)
        elif isinstance(default, dict):
            if not isinstance(value, dict):
                raise ConfigError(f"config key '{path}' must be a mapping, got {value!r}")
            out[key] = merge(default, value, path + ".")
        elif not _type_ok(value, default):
            raise ConfigError(f"config key '{path}' must be {type(default).__name__}, got {value!r}")
        else:
            if path in CHOICES and value not in CHOICES[path]:
                raise ConfigError(f"config key '{path}' = {value!r}; choose from {', '.join(CHOICES[path])}")
            out[key] = float(value) if isinstance(default, float) else value
    return out


def parse_set(item: str) -> dict:
    """'train.lr=1e-5' -> {'train': {'lr': 1e-05}} (the value is read as YAML)."""
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected key=value")
    key, raw = item.split("=", 1)
    value = yaml.safe_load(raw) if raw.strip() else ""
    if isinstance(value, str) and _looks_numeric(value):
        value = float(value)  # YAML 1.1 reads '1e-5' as a string
    nested: dict = value
    for part in reversed(key.strip().split(".")):
        nested = {part: nested}
    return nested


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def preset_names() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files("rlvr.presets").iterdir() if p.name.endswith(".yaml"))


def read_yaml(source: str) -> dict:
    """A YAML file path, or the name of a preset shipped in rlvr/presets."""
    path = Path(source)
    if not path.exists():
        if source in preset_names():
            path = Path(str(resources.files("rlvr.presets") / f"{source}.yaml"))
        else:
            raise ConfigError(f"config {source!r}: no such file, and not a preset ({', '.join(preset_names())})")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"config {path}: expected a mapping at the top level")
    return data


def resolve(source: str | None = None, sets: list[str] = ()) -> dict:
    """DEFAULTS <- file or preset <- --set overrides, validated. Returns a plain dict."""
    cfg = merge(DEFAULTS, read_yaml(source)) if source else copy.deepcopy(DEFAULTS)
    for item in sets:
        cfg = merge(cfg, parse_set(item))
    return cfg


def as_namespace(cfg: dict) -> SimpleNamespace:
    """Attribute access for reading (cfg.train.lr); open sections stay plain dicts/lists."""
    def convert(d, prefix=""):
        return SimpleNamespace(**{k: convert(v, f"{prefix}{k}.") if isinstance(v, dict) and f"{prefix}{k}" not in OPEN_KEYS
                                  else v for k, v in d.items()})
    return convert(cfg)


def dump(cfg: dict) -> str:
    return yaml.safe_dump(cfg, sort_keys=False)
