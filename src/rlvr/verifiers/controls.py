"""Control rewards: what an RL run learns when its reward carries no information about the answer.

A gain from RLVR could come from the format reward, from any reward paid at the right rate, or from fine-tuning
at all. The main job's controls (`rlvr run --controls`, eval.controls) train the same model with the same budget,
seed and settings under one of these instead of the real reward (reward.control):

- "random_rate": each batch is scored by the real reward to get the policy's own success rate p (the share of its
  completions the correctness term calls correct); every completion then gets a Bernoulli(p) reward of 1 or 0,
  independent of what it says. Same rate, same variance across a group, no signal about which answer is right.
- "format_only": the reward is the format term alone (its unweighted value, 0 to 1): the policy is paid for
  writing `\\boxed{}` (or the answer tags), whatever it puts inside.

Why a wrapper around the whole Reward rather than a new term kind: a term kind scores one completion at a time
(in worker processes, under a deadline) and never sees the batch, while the random control needs the batch's
success rate. Wrapping the Reward keeps one code path for every step (rlvr.training.batch.collect calls it as it
calls the real one) and leaves the verdicts the real verifier's: a control run's verdict/correct_frac curve is its
true accuracy, side by side with the RLVR run's. The draws are seeded by the run's seed and the batch's texts, so
a resumed run draws exactly what the uninterrupted one drew.
"""

from __future__ import annotations

import hashlib

import numpy as np

from rlvr.config import ConfigError

CONTROLS = ("random_rate", "format_only")
FORMAT_KINDS = ("boxed_format",)


class ControlReward:
    """`ControlReward(reward, kind, seed)(completions, problems) -> RewardResult`: the real reward's verdicts and
    terms, with `total` (what the advantages use) replaced by the control's and added as the term "control"."""

    def __init__(self, reward, kind: str, seed: int):
        if kind not in CONTROLS:
            raise ConfigError(f"reward.control={kind!r}; choose from none, {', '.join(CONTROLS)}")
        self.format_terms = [t.name for t in reward.terms if t.kind in FORMAT_KINDS]
        if kind == "format_only" and not self.format_terms:
            raise ConfigError(
                f"reward.control=format_only: the reward has no format term (kind "
                f"{' or '.join(FORMAT_KINDS)}) to pay alone"
            )
        self.reward, self.kind, self.seed = reward, kind, seed

    def __getattr__(self, name):  # terms, weights, as_trl: the real reward's
        return getattr(self.reward, name)

    def __call__(self, completions: list, problems: list):
        real = self.reward(completions, problems)
        if self.kind == "random_rate":
            total = random_at_rate(real.verdicts, self.seed, completions)
        else:
            total = [sum(real.terms[name][i] for name in self.format_terms) for i in range(len(completions))]
        real.total = total
        real.terms = {**real.terms, "control": list(total)}
        return real


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
    """The reward a run trains on: the real one for "none", else its control (ControlReward)."""
    return reward if kind == "none" else ControlReward(reward, kind, seed)


__all__ = ["CONTROLS", "ControlReward", "random_at_rate", "control_reward"]
