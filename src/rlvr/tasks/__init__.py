"""Tasks: data (generated or loaded) next to the verifier that grades it."""

from rlvr.tasks.base import SPLITS, DatasetError, Problem, validate_problem

__all__ = ["SPLITS", "DatasetError", "Problem", "validate_problem"]
