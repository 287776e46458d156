"""The one error type for a configuration mistake, in a leaf module so every package can raise it."""


class ConfigError(ValueError):
    """A configuration mistake; the message is one line naming the key, the value and the choices."""


__all__ = ["ConfigError"]
