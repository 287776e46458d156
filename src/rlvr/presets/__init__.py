"""Config presets: whole configs shipped as YAML files in this folder (`rlvr train default`, `rlvr run --preset
reasoning-gym`), a registry whose entries are the files, each described by its first comment line. Not to be confused
with the algorithm presets (rlvr.algorithms.PRESETS: grpo, dapo, ...), which fill only the `algorithm` section."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from rlvr.registry import Registry


def _config_presets() -> Registry[Path]:
    """Config presets: the YAML files shipped in rlvr/presets, each described by its first comment line."""
    presets: Registry[Path] = Registry("config preset", key="config")
    for item in sorted(resources.files("rlvr.presets").iterdir(), key=lambda p: p.name):
        if item.name.endswith(".yaml"):
            first = next(iter(item.read_text().splitlines()), "")
            presets.add(item.name[:-5], Path(str(item)), first.lstrip("# ") if first.startswith("#") else "")
    return presets


CONFIG_PRESETS = _config_presets()


__all__ = ["CONFIG_PRESETS"]
