"""Validated configuration: a wrong key names itself and the allowed keys; presets are data."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration mistake; the message is one line naming the key, the value and the choices."""
