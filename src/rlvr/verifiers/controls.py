"""Control rewards: what an RL run learns when its reward carries no information about the answer.

A gain from RLVR could come from the format reward, from any reward paid at the right rate, or from fine-tuning
at all. The main job's controls (`rlvr run --controls`, eval.controls) train the same model with the same budget,
seed and settings under one of these instead of the real reward (reward.control):

- "random_rate": each batch is scored by the real reward to get the policy's own success rate p (the share of its
  completions the correctness term calls correct); every completion then gets a Bernoulli(p) reward of 1 or 0,
  independent of what it says. Same rate, same variance across a group, no signal about which answer is right.
- "format_only": the reward is the format term alone (its unweighted value, 0 to 1): the policy is paid for
  writing `\\boxed{}` (or the answer tags), whatever it puts inside.

Each is an entry of CONTROLS (`rlvr list control`), and so are "none", the real reward, and "no_tools", the main
job's control for an environment task (single-turn without the tools, on the real reward): an entry says whether it
wraps the reward (`Control.wraps`) or changes the episode (`Control.single_turn`), so no caller tests the name.
reward.control takes the reward's entries, eval.controls every control but none. Both (and `control_reward`) also
take `package.module:attr`, a class or function `(reward, seed) -> reward` of your own, a wrapping control as these
are.

Why a wrapper around the whole Reward rather than a new term kind: a term kind scores one completion at a time
(in worker processes, under a deadline) and never sees the batch, while the random control needs the batch's
success rate. Wrapping the Reward keeps one code path for every step (rlvr.training.batch.collect calls it as it
calls the real one) and leaves the verdicts the real verifier's: a control run's verdict/correct_frac curve is its
true accuracy, side by side with the RLVR run's. The draws are seeded by the run's seed and the batch's texts, so
a resumed run draws exactly what the uninterrupted one drew.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlvr.config import ConfigError
from rlvr.registry import Registry

FORMAT_KINDS = ("boxed_format",)


class ControlReward:
    """`ControlReward(reward, seed)(completions, problems) -> RewardResult`: the real reward's verdicts and terms,
    with `total` (what the advantages use) replaced by the control's (`control_total`, a subclass's) and added as
    the term "control"."""

    def __init__(self, reward, seed: int):
        self.reward, self.seed = reward, seed

    def __getattr__(self, name):  # terms, weights, as_trl: the real reward's
        return getattr(self.reward, name)

    def control_total(self, real, completions: list) -> list[float]:
        """(B,) the totals the run trains on, from the real RewardResult: each control subclass's own."""
        raise NotImplementedError

    def __call__(self, completions: list, problems: list):
        real = self.reward(completions, problems)
        total = self.control_total(real, completions)
        real.total = total
        real.terms = {**real.terms, "control": list(total)}
        return real


class RandomRate(ControlReward):
    """Bernoulli(p) rewards at the batch's own success rate p (random_at_rate)."""

    def control_total(self, real, completions: list) -> list[float]:
        return random_at_rate(real.verdicts, self.seed, completions)


class FormatOnly(ControlReward):
    """The format terms' unweighted values alone; a reward without one is refused (ConfigError)."""

    def __init__(self, reward, seed: int):
        super().__init__(reward, seed)
        self.format_terms = [t.name for t in reward.terms if t.kind in FORMAT_KINDS]
        if not self.format_terms:
            raise ConfigError(
                f"reward.control=format_only: the reward has no format term (kind "
                f"{' or '.join(FORMAT_KINDS)}) to pay alone"
            )

    def control_total(self, real, completions: list) -> list[float]:
        return [sum(real.terms[name][i] for name in self.format_terms) for i in range(len(completions))]


@dataclass(frozen=True)
class Control:
    """A CONTROLS entry. wrap: `(reward, seed) -> the reward a run trains on`; None for `none`, the real reward,
    which wraps nothing (what `rlvr serve` serves as it is, what the main job's report calls RLVR), and for
    `no_tools`. single_turn: the control changes the episode, not the reward: its run trains single-turn without the
    tools on the real reward (rlvr.training.controls.without_tools). A run's own config says that with
    episode.environment, so reward.control takes only the reward's entries and eval.controls every control."""

    wrap: Callable[[Any, int], Any] | None
    single_turn: bool = False

    @property
    def wraps(self) -> bool:
        """Whether the run trains on a stand-in built around the real reward rather than on the real reward."""
        return self.wrap is not None

    @property
    def on_reward(self) -> bool:
        """Whether reward.control may name it: the reward's entries (none and the wrappers), not an episode's."""
        return not self.single_turn

    @property
    def is_control_run(self) -> bool:
        """Whether eval.controls may name it: a control run changes the reward or the episode (none is RLVR)."""
        return self.wraps or self.single_turn


def _control_plugin(obj, ref: str) -> Control:
    """A user's control (`package.module:attr`): a class or function `(reward, seed)`, a wrapping control as the
    built-ins are."""
    if isinstance(obj, Control):
        return obj
    if not callable(obj):
        raise ConfigError(f"reward.control={ref!r} is not a class or function (reward, seed) -> reward")
    return Control(obj)


CONTROLS: Registry[Control] = Registry("reward control", key="reward.control", plugin=_control_plugin)
CONTROLS.add("none", Control(None), "the real reward (no control)")
CONTROLS.add("random_rate", Control(RandomRate), "Bernoulli(p) at the policy's own success rate p, per batch")
CONTROLS.add("format_only", Control(FormatOnly), "the format term alone, whatever the answer")
CONTROLS.add("no_tools", Control(None, single_turn=True), "eval.controls only: RL single-turn without the tools")


def random_at_rate(verdicts: list, seed: int, texts: list) -> list[float]:
    """(B,) Bernoulli(p) rewards, p = the share of `verdicts` that are correct; the generator seeded by `seed` and
    a hash of the batch's texts (deterministic, and different from batch to batch)."""
    n = len(verdicts)
    if n == 0:
        return []
    p = sum(v.status == "correct" for v in verdicts) / n
    digest = hashlib.sha256("\x00".join(str(t) for t in texts).encode()).digest()
    rng = np.random.default_rng([seed, int.from_bytes(digest[:8], "little")])
    return (rng.random(n) < p).astype(float).tolist()


def control_reward(reward, kind: str, seed: int):
    """The reward a run trains on: reward.control's wrapper around the real one, or the real one (`none`)."""
    wrap = CONTROLS.get(kind).wrap
    return reward if wrap is None else wrap(reward, seed)


__all__ = [
    "CONTROLS",
    "Control",
    "ControlReward",
    "FormatOnly",
    "RandomRate",
    "random_at_rate",
    "control_reward",
]
