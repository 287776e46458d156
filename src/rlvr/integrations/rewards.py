"""What the adapters share: a reward spec -> rlvr's Reward, and one framework row -> a Problem.

A spec is what a user of another framework names rlvr's reward by:
- None: rlvr's default reward (math correctness + the format term at weight 0.1);
- a verifier kind ("math", "exact", "python_tests", ...): that verifier alone, weight 1;
- a YAML file or preset name: an rlvr config (its `reward` section, its task's answer format) or a reward section;
- a dict: a reward section {"terms": [...], ...}, one term {"kind": ...}, or a whole config (its reward section, or
  rlvr's default one when it has none);
- a Reward, used as it is.
The reward section is completed from rlvr's defaults and checked as a config file's is (rlvr.config: unknown keys,
types, choices, ranges), its terms by build_reward (kinds, settings, the 10% shaping rule), so a spec that rlvr's own
training refuses is refused here too.
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict
from pathlib import Path

from rlvr.config import DEFAULTS, ConfigError, RewardConfig, as_config, reward_config
from rlvr.presets import read_yaml
from rlvr.tasks import load_task
from rlvr.tasks.base import math_grader
from rlvr.tasks.rows import parse_tests, problem_for  # the shared row rules, re-exported here
from rlvr.verifiers.compose import Reward, build_reward, resolve_reward
from rlvr.verifiers.registry import KINDS

_CACHE: dict[str, Reward] = {}


def reward_and_format(spec=None, **overrides) -> tuple[RewardConfig, str | None]:
    """(the reward section a spec names, checked as a config file's is, and the answer format its terms read: the
    config's task's for a whole config, else None, which is each term's own default, boxed)."""
    if spec is None:
        section: dict = {}
    elif isinstance(spec, str) and spec in KINDS:
        section = {"terms": [{"name": spec, "kind": spec, "weight": 1.0}]}
    elif isinstance(spec, (str, Path)):
        return reward_and_format(read_yaml(str(spec)), **overrides)
    elif isinstance(spec, dict) and "terms" in spec:
        section = copy.deepcopy(spec)
    elif isinstance(spec, dict) and "kind" in spec:
        section = {"terms": [{"name": spec["kind"], **copy.deepcopy(spec)}]}
    elif (
        isinstance(spec, dict) and spec and set(spec) <= set(DEFAULTS)
    ):  # a whole rlvr config, checked as train checks it
        cfg = as_config(spec)
        task = load_task(cfg.task.name, **cfg.task.settings)
        resolved = asdict(resolve_reward(cfg.reward, task))
        return reward_config({**resolved, **overrides}), getattr(task, "answer_format", None)
    else:
        raise ConfigError(
            f"reward spec {spec!r}: give a verifier kind ({', '.join(sorted(KINDS))}), a config file "
            f"or preset, a reward section {{terms: [...]}}, one term {{kind: ...}}, or None"
        )
    section = {**section, **overrides}
    # no task here to take a grader from: rlvr's answer grader (math + the boxed format term at 0.1)
    return reward_config({**section, "terms": section.get("terms") or math_grader("math")}), None


def build(spec=None, **overrides) -> Reward:
    """The Reward a spec names (a Reward is returned as it is), reading answers in the format of the spec's task."""
    if isinstance(spec, Reward):
        return spec
    return build_reward(*reward_and_format(spec, **overrides))


def cached(spec=None, **overrides) -> Reward:
    """build(), once per distinct spec: per-sample adapters (verl, OpenRLHF) call it for every completion."""
    if isinstance(spec, Reward):
        return spec
    key = json.dumps([spec if not isinstance(spec, Path) else str(spec), overrides], sort_keys=True, default=str)
    if key not in _CACHE:
        _CACHE[key] = build(spec, **overrides)
    return _CACHE[key]


__all__ = ["build", "cached", "problem_for", "parse_tests"]
