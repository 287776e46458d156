"""Rollout sampling: the public entry point. The backends live in `rlvr.sampling`."""
from rlvr.sampling import BACKENDS, Rollouts, Sampler, make_sampler

__all__ = ["BACKENDS", "Rollouts", "Sampler", "make_sampler"]
