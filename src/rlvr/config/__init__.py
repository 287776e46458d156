"""Validated configuration: a wrong key names itself and the allowed keys; presets are data.

A config is DEFAULTS, then a YAML file (or a named preset), then `--set key=value` overrides, each
checked against DEFAULTS: every key must exist there and every value must have the default's type.
Sections listed in OPEN_KEYS hold free-form settings checked by the component that reads them. Keys in REGISTERED
name an entry of a registry (rollout.backend: a sampler backend); the registry is their one list of names, checked
by rlvr.training.lifecycle.check_registered, which every entry point calls before a task, model or run directory.
The sections are dataclasses (`Config` and its parts, rlvr.config.sections): their defaults are DEFAULTS, their field
metadata (rlvr.config.fields, with the rule one value is checked by) the choices and open keys; the checked dict
becomes one `Config` at the entry (`as_config`) and only it travels on.
"""

from __future__ import annotations

import copy
from dataclasses import asdict

import yaml

from rlvr.config.fields import NO_ITEMS, check_name, check_value, each_value, in_range
from rlvr.config.sections import (
    FULL_FINE_TUNING_LR,
    LORA_LR,
    Config,
    DistillConfig,
    EpisodeConfig,
    EvalConfig,
    LogConfig,
    LoraConfig,
    ModelConfig,
    RewardConfig,
    RolloutConfig,
    SftConfig,
    TaskConfig,
    TrainConfig,
    VllmConfig,
    walk,
)
from rlvr.errors import ConfigError
from rlvr.machine import auto_dtypes
from rlvr.presets import read_yaml
from rlvr.yaml_io import DottedKey, parse_set

DEFAULTS: dict = asdict(Config())
OPEN_KEYS = {key for key, f in walk(Config) if f.metadata.get("open")}  # read and checked by another component
CHOICES = {key: f.metadata["choices"] for key, f in walk(Config) if "choices" in f.metadata}
EACH = {key: f.metadata["each"] for key, f in walk(Config) if "each" in f.metadata}  # list keys (no registry's names)
REGISTERED = {
    key: f.metadata["registry"] for key, f in walk(Config) if f.metadata.get("registry")
}  # key -> its registry
# key -> the entries' attribute that says the key may name one, where a key takes only some of its registry's
REGISTERED_WHERE = {key: f.metadata["where"] for key, f in walk(Config) if f.metadata.get("where")}
_META = {key: f.metadata for key, f in walk(Config)}  # each leaf's choices and range, for check_value


def as_config(cfg: Config | dict) -> Config:
    """A Config as it is; a dict (whole, or partial over DEFAULTS: the Python API) checked as `resolve` checks a file."""
    return cfg if isinstance(cfg, Config) else Config.from_dict(resolve_auto(merge(DEFAULTS, cfg)))


def reward_config(section: dict) -> RewardConfig:
    """A reward section given as a dict where there is no config file (rlvr verify's and rlvr serve's pool settings,
    TRL's reward adapters, a user's dict): over the defaults, checked as a config file's reward section is."""
    return as_config({"reward": section}).reward


def merge(base: dict, update: dict, prefix: str = "") -> dict:
    """Merge `update` into a copy of `base`, refusing unknown keys and wrong values (`check_value`)."""
    out = copy.deepcopy(base)
    for key, value in update.items():
        path = f"{prefix}{key}"
        if key not in base:
            allowed = ", ".join(sorted(base))
            where = f"in '{prefix[:-1]}'" if prefix else "at the top level"
            raise ConfigError(f"unknown config key '{path}'; allowed keys {where}: {allowed}")
        default = base[key]
        if path in OPEN_KEYS:
            out[key] = _set_open(base[key], value)
        elif path in EACH:
            out[key] = each_value(path, value, _META[path])
        elif isinstance(default, dict):
            if not isinstance(value, dict):
                raise ConfigError(f"config key '{path}' must be a mapping, got {value!r}")
            out[key] = merge(default, value, path + ".")
        else:
            out[key] = check_value(path, value, default, _META[path])
    return out


def _set_open(current, value):
    """An open section's new value: a dotted --set updates the keys it names (recursively), anything else replaces."""
    if not (isinstance(value, DottedKey) and isinstance(current, dict)):
        return copy.deepcopy(dict(value) if isinstance(value, DottedKey) else value)
    out = copy.deepcopy(current)
    for k, v in value.items():
        out[k] = _set_open(out.get(k), v)
    return out


def resolve(source: str | None = None, sets: list[str] | tuple[str, ...] = ()) -> dict:
    """DEFAULTS <- file or preset <- --set overrides, validated (a registry's names: by check_registered, where the
    run starts), every `auto` made concrete (resolve_auto). Returns a plain dict."""
    cfg = merge(DEFAULTS, read_yaml(source)) if source else copy.deepcopy(DEFAULTS)
    for item in sets:
        cfg = merge(cfg, parse_set(item))
    return resolve_auto(cfg)


def resolve_auto(cfg: dict) -> dict:
    """A whole config dict with each `auto` made concrete, so that the run directory's config.yaml records what ran:
    rollout.dtype and train.autocast for this machine (rlvr.machine.auto_dtypes), train.lr for the run's LoRA setting
    (LORA_LR with model.lora.enabled, else FULL_FINE_TUNING_LR)."""
    if cfg["train"]["lr"] == "auto":
        cfg["train"]["lr"] = LORA_LR if cfg["model"]["lora"]["enabled"] else FULL_FINE_TUNING_LR
    return auto_dtypes(cfg)


def dump(cfg: dict) -> str:
    return yaml.safe_dump(cfg, sort_keys=False)


__all__ = [
    "CHOICES",
    "DEFAULTS",
    "EACH",
    "NO_ITEMS",
    "OPEN_KEYS",
    "REGISTERED",
    "REGISTERED_WHERE",
    "Config",
    "ConfigError",
    "EpisodeConfig",
    "EvalConfig",
    "LogConfig",
    "LoraConfig",
    "ModelConfig",
    "RewardConfig",
    "RolloutConfig",
    "SftConfig",
    "DistillConfig",
    "TaskConfig",
    "TrainConfig",
    "VllmConfig",
    "as_config",
    "check_name",
    "check_value",
    "dump",
    "in_range",
    "merge",
    "parse_set",
    "resolve",
    "resolve_auto",
    "reward_config",
]
