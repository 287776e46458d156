"""Config presets: whole configs shipped as YAML files in this folder (`rlvr train default`, `rlvr run --preset
reasoning-gym`), a registry whose entries are the files, each described by its first comment line. Not to be confused
with the algorithm presets (rlvr.algorithms.PRESETS: grpo, dapo, ...), which fill only the `algorithm` section."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from rlvr.errors import ConfigError
from rlvr.registry import Registry
from rlvr.yaml_io import load_yaml


def _config_presets() -> Registry[Path]:
    """Config presets: the YAML files shipped in rlvr/presets, each described by its first comment line."""
    presets: Registry[Path] = Registry("config preset", key="config")
    for item in sorted(resources.files("rlvr.presets").iterdir(), key=lambda p: p.name):
        if item.name.endswith(".yaml"):
            first = next(iter(item.read_text().splitlines()), "")
            presets.add(item.name[:-5], Path(str(item)), first.lstrip("# ") if first.startswith("#") else "")
    return presets


CONFIG_PRESETS = _config_presets()


def read_yaml(source: str) -> dict:
    """A YAML file path, or the name of a preset shipped in rlvr/presets."""
    path = Path(source)
    if not path.exists():
        if source in CONFIG_PRESETS:
            path = CONFIG_PRESETS.get(source)
        else:
            names = ", ".join(CONFIG_PRESETS.names())
            raise ConfigError(f"config {source!r}: no such file, and not a preset ({names})")
    data = load_yaml(path.read_text(), f"config {path}") or {}
    if not isinstance(data, dict):
        raise ConfigError(f"config {path}: expected a mapping at the top level")
    return data


__all__ = ["CONFIG_PRESETS", "read_yaml"]
