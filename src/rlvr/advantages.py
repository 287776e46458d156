"""Compatibility path: the advantage functions live in rlvr.algorithms.advantages."""
from rlvr.algorithms.advantages import *  # noqa: F401,F403
from rlvr.algorithms.advantages import __all__  # noqa: F401
