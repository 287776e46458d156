"""Compatibility path: the loss functions live in rlvr.algorithms.losses."""
from rlvr.algorithms.losses import *  # noqa: F401,F403
from rlvr.algorithms.losses import __all__  # noqa: F401
