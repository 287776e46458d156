"""GRPO, DAPO, GSPO and Dr. GRPO as data: four values of one frozen dataclass, not four code paths.

The trainer reads an `Algorithm` and passes its numbers to the pure functions in `advantages` and
`losses`; a new variant is a new row in PRESETS (or a config override), never a new branch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlvr.algorithms.advantages import ADVANTAGE_SCALES, OVERLONG_SHAPINGS
from rlvr.algorithms.correction import ROLLOUT_CORRECTIONS
from rlvr.algorithms.losses import AGGREGATIONS, RATIO_LEVELS, SURROGATES
from rlvr.config import check_value, in_range
from rlvr.registry import ConfigError, Registry

OVERLONG = OVERLONG_SHAPINGS.names()  # the built-in shapings' names

# The registry that names each string field's choices (a name there, or package.module:attr), checked on construction.
_REGISTRIES: dict[str, Registry[Any]] = {
    "adv_scale": ADVANTAGE_SCALES,
    "ratio": RATIO_LEVELS,
    "surrogate": SURROGATES,
    "agg": AGGREGATIONS,
    "rollout_correction": ROLLOUT_CORRECTIONS,
    "overlong": OVERLONG_SHAPINGS,
}


@dataclass(frozen=True)
class Algorithm:
    """Every choice that distinguishes the four algorithms.

    adv_scale: "group" | "batch" | "none", how `group_advantages` scales r - mean (advantages).
    ratio: "token" | "sequence", the importance-ratio level of `policy_loss`.
    surrogate: "clip", the per-token objective of the ratio and the advantage (losses.SURROGATES).
    clip_low, clip_high: the trust region [1 - clip_low, 1 + clip_high] for the ratio.
    agg: "token-mean" | "seq-mean-token-mean" | "seq-mean-token-sum-norm", how `aggregate` reduces.
    beta: weight of the k3 KL to the reference (the base model, adapter disabled); 0 skips its pass.
    dynamic_sampling: drop zero-variance groups and refill, up to `max_sampling_rounds` rounds.
    overlong: "none" | "filter" (truncated rows leave the loss) | "soft" (linear reward penalty over
      the last `overlong_buffer_frac` of the generation budget).
    adv_eps: added to the std before dividing.
    rollout_correction: "none" | "truncated" | "masked-token" | "masked-sequence", how the loss corrects for the
      sampler's probabilities differing from the trainer's (rlvr.algorithms.correction), with `correction_cap`.
    """

    name: str
    adv_scale: str = "group"
    ratio: str = "token"
    surrogate: str = "clip"
    clip_low: float = in_range(0.2, 0.0, 1.0, below=True)  # < 1: the ratio's lower bound 1 - clip_low stays positive
    clip_high: float = in_range(0.2, 0.0)
    agg: str = "seq-mean-token-mean"
    beta: float = in_range(0.0, 0.0)
    dynamic_sampling: bool = False
    max_sampling_rounds: int = in_range(3, 1)
    overlong: str = "none"
    overlong_buffer_frac: float = in_range(0.2, 0.0, 1.0)
    adv_eps: float = in_range(1e-4, 0.0)
    rollout_correction: str = "none"
    correction_cap: float = in_range(2.0, 1.0, above=True)  # > 1: ratios beyond it are capped or dropped

    def __post_init__(self) -> None:
        """Each field checked as the config checks its keys (rlvr.config.check_value: the default's type, the field's
        range; an int given for a float becomes the float), then each string field against its registry."""
        for f in dataclasses.fields(self):
            if f.default is not dataclasses.MISSING:  # every field but `name`
                object.__setattr__(
                    self, f.name, check_value(f"algorithm.{f.name}", getattr(self, f.name), f.default, f.metadata)
                )
        for key, registry in _REGISTRIES.items():
            registry.check(getattr(self, key), f"algorithm.{key}")

    def loss_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of `losses.policy_loss` that this algorithm fixes."""
        return {
            "ratio": self.ratio,
            "surrogate": self.surrogate,
            "clip_low": self.clip_low,
            "clip_high": self.clip_high,
            "agg": self.agg,
            "beta": self.beta,
            "rollout_correction": self.rollout_correction,
            "correction_cap": self.correction_cap,
        }

    def overlong_buffer(self, max_len: int) -> int:
        """The soft-penalty buffer in tokens for a generation budget of max_len tokens."""
        return int(round(self.overlong_buffer_frac * max_len))


# Algorithm presets (algorithm.preset); a plug-in `package.module:attr` names an Algorithm of the user's.
PRESETS: Registry[Algorithm] = Registry("algorithm preset", key="algorithm.preset")
for _name, _algorithm, _doc in (
    # GRPO (Shao et al. 2024, DeepSeekMath): group mean/std advantages, PPO's symmetric clip 0.2,
    # each sequence's token mean, then the mean over sequences. The paper used a KL term (beta 0.04);
    # we default to 0 as DAPO, TRL and verl now do, which also saves the reference forward pass.
    (
        "grpo",
        Algorithm(
            name="grpo",
            adv_scale="group",
            ratio="token",
            clip_low=0.2,
            clip_high=0.2,
            agg="seq-mean-token-mean",
            beta=0.0,
        ),
        "GRPO: group mean/std advantages, symmetric clip 0.2, sequence mean of token means",
    ),
    # DAPO (Yu et al. 2025): clip-higher 0.2 / 0.28 against entropy collapse, token-level mean so long
    # answers are not down-weighted, dynamic sampling (no zero-variance groups), overlong reward shaping
    # (soft punishment; the paper's buffer is 4096 of 20480 tokens, i.e. 20%), no KL.
    (
        "dapo",
        Algorithm(
            name="dapo",
            adv_scale="group",
            ratio="token",
            clip_low=0.2,
            clip_high=0.28,
            agg="token-mean",
            beta=0.0,
            dynamic_sampling=True,
            overlong="soft",
            overlong_buffer_frac=0.2,
        ),
        "DAPO: clip-higher 0.28, token mean, dynamic sampling, soft overlong penalty, no KL",
    ),
    # GSPO (Zheng et al. 2025, Qwen): a sequence-level ratio (length-normalised) whose trust region is
    # tiny, 3e-4 / 4e-4, aggregated as each sequence's token mean then mean over sequences.
    (
        "gspo",
        Algorithm(
            name="gspo",
            adv_scale="group",
            ratio="sequence",
            clip_low=3e-4,
            clip_high=4e-4,
            agg="seq-mean-token-mean",
            beta=0.0,
        ),
        "GSPO: sequence-level (length-normalised) ratio, trust region 3e-4 / 4e-4",
    ),
    # Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-like training"): no std division (it favours
    # too-easy and too-hard prompts) and a constant normaliser (sum / (N_seq * max length)) instead of
    # per-sequence length (which rewards long wrong answers); otherwise GRPO.
    (
        "dr_grpo",
        Algorithm(
            name="dr_grpo",
            adv_scale="none",
            ratio="token",
            clip_low=0.2,
            clip_high=0.2,
            agg="seq-mean-token-sum-norm",
            beta=0.0,
        ),
        "Dr. GRPO: no std division, a constant normaliser (no length bias)",
    ),
):
    PRESETS.add(_name, _algorithm, _doc)

FIELDS = tuple(f.name for f in dataclasses.fields(Algorithm))


def get_preset(name: str) -> Algorithm:
    """The preset called `name` (or a plug-in Algorithm); ConfigError listing the presets otherwise."""
    algorithm = PRESETS.get(name)
    if not isinstance(algorithm, Algorithm):
        raise ConfigError(f"algorithm.preset={name!r} is a {type(algorithm).__name__}, not an rlvr Algorithm")
    return algorithm


def with_overrides(base: Algorithm, overrides: Mapping[str, Any]) -> Algorithm:
    """A copy of `base` with some fields replaced, each checked as the config's keys are (`Algorithm.__post_init__`);
    an unknown field names itself and the allowed ones."""
    unknown = [k for k in overrides if k not in FIELDS or k == "name"]
    if unknown:
        allowed = ", ".join(f for f in FIELDS if f != "name")
        raise ConfigError(f"algorithm.{unknown[0]} is not a field; allowed: preset, {allowed}")
    return dataclasses.replace(base, **overrides)


def algorithm_from_config(cfg: str | Mapping[str, Any] | None) -> Algorithm:
    """Build the algorithm from a config value: a preset name, or {"preset": name, field: value, ...}.

    None or a mapping without "preset" starts from "grpo".
    """
    if cfg is None:
        return get_preset("grpo")
    if isinstance(cfg, str):
        return get_preset(cfg)
    if not isinstance(cfg, Mapping):
        raise ConfigError(f"algorithm must be a preset name or a mapping, got {type(cfg).__name__}")
    rest = {k: v for k, v in cfg.items() if k != "preset"}
    return with_overrides(get_preset(cfg.get("preset", "grpo")), rest)
