"""rlvr's verifiers as TRL reward functions (GRPOTrainer, RLOOTrainer, ...).

    from rlvr.integrations.trl import reward_funcs
    funcs, weights = reward_funcs("math")            # or None (math + format), a config file, a reward section
    trainer = GRPOTrainer(model=..., reward_funcs=funcs, args=GRPOConfig(..., reward_weights=weights),
                          train_dataset=dataset)     # rows: "prompt" and a gold column ("answer", "solution", ...)

rlvr's tool environments go to TRL as an `environment_factory` class: `environment_class(task, tools)` with its
rows `environment_dataset(task)` (rlvr.integrations.trl_environment).

Each function has TRL's signature `(prompts, completions, **columns) -> list[float | None]` and scores through
the term's verifier exactly as rlvr's training does (worker pool, per-item deadline, sandbox for code). The gold
is the first of `answer`, `gold`, `solution`, `ground_truth` among the dataset's columns; code verifiers read
`tests`.

Faults are not wrong answers: a verdict of `timeout`, `error` or `invalid_gold` returns None, which TRL leaves
out of the reward (NaN-aware sums and baselines). When the first (correctness) term faults on a completion, every
other term of the same `reward_funcs` call returns None for it too, so the whole completion is unscorable (TRL
gives it no advantage) instead of earning the format bonus alone. rlvr's own trainer differs on one status: it
keeps a `timeout` as reward 0 (a pathological answer, such as a power tower the guard refuses, must not pay by
escaping the reward); `reward_funcs(spec, none_on=("error", "invalid_gold"))` gives TRL that rule.

Where TRL passes `log_metric` (TRL 1.16 does), every call logs `verdict/<term>/<status>_frac` (every status for
the first term, the fault statuses for the others) beside TRL's own metrics, and `log_extra` adds a
`<term>_status` column to the completions table; the counts since the start are also on each function
(`func.counts`).
"""

from __future__ import annotations

from collections import Counter

from rlvr.integrations import rewards
from rlvr.integrations.trl_environment import environment_class, environment_dataset
from rlvr.verifiers.base import FAULT_STATUSES, STATUSES
from rlvr.verifiers.compose import problems_from_columns
from rlvr.verifiers.registry import KINDS

# keyword arguments TRL adds that are not dataset columns
TRL_EXTRAS = ("trainer_state", "log_metric", "log_extra", "completion_ids", "environments")


class _Batch:
    """The rows the first term found faulty in the batch it scored last. One TRL scoring call passes the same
    `completions` list object to every reward function; holding it (not its id) means a later list can never
    be mistaken for it."""

    def __init__(self):
        self.completions, self.faulty = None, frozenset()

    def same(self, completions) -> bool:
        return self.completions is not None and completions is self.completions


class RewardFunc:
    """One rlvr reward term as a TRL reward function; unweighted (TRL applies `reward_weights`)."""

    def __init__(self, term, batch: _Batch, first: bool, none_on: tuple = FAULT_STATUSES):
        self.term, self._batch, self.first, self.none_on = term, batch, first, tuple(none_on)
        self.__name__ = term.name  # TRL names the function's metrics by it: rewards/<name>/mean
        self.counts: Counter = Counter()

    def __repr__(self) -> str:
        return f"rlvr RewardFunc({self.term.name!r}, kind={self.term.kind!r})"

    def __call__(self, prompts=None, completions=None, **columns) -> list[float | None]:
        extras = {k: columns.pop(k, None) for k in TRL_EXTRAS}
        batch = completions if completions is not None else []
        problems = problems_from_columns(len(batch), {**columns, "prompts": prompts}, KINDS[self.term.kind].grades)
        verdicts = self.term.verdicts(list(batch), problems)
        left_out = {i for i, v in enumerate(verdicts) if v.status in self.none_on}
        if self.first:
            self._batch.completions, self._batch.faulty = batch, frozenset(left_out)
        elif self._batch.same(batch):
            left_out |= self._batch.faulty
        self.counts.update(v.status for v in verdicts)
        self._log(verdicts, extras)
        return [None if i in left_out else v.reward for i, v in enumerate(verdicts)]

    def _log(self, verdicts, extras) -> None:
        n = max(len(verdicts), 1)
        if callable(extras["log_metric"]):
            for status in STATUSES if self.first else FAULT_STATUSES:
                extras["log_metric"](
                    f"verdict/{self.term.name}/{status}_frac", sum(v.status == status for v in verdicts) / n
                )
        if callable(extras["log_extra"]):
            extras["log_extra"](f"{self.term.name}_status", [v.status for v in verdicts])


def reward_funcs(spec=None, *, none_on: tuple = FAULT_STATUSES, **overrides) -> tuple[list[RewardFunc], list[float]]:
    """(TRL reward functions, their weights for GRPOConfig.reward_weights) for a reward spec (see
    rlvr.integrations.rewards: None, a verifier kind, a config file or preset, a reward section or one term).
    none_on: the verdict statuses returned as None (left out by TRL). `overrides` are reward-section keys:
    workers (verifier processes; 0 = in the trainer's process), timeout_s (the per-item deadline)."""
    unknown = sorted(set(none_on) - set(FAULT_STATUSES))
    if unknown:
        raise ValueError(f"none_on={unknown}: only fault statuses can be left out ({', '.join(FAULT_STATUSES)})")
    reward = rewards.build(spec, **overrides)
    batch = _Batch()
    return [RewardFunc(t, batch, i == 0, none_on) for i, t in enumerate(reward.terms)], list(reward.weights)


__all__ = ["reward_funcs", "RewardFunc", "TRL_EXTRAS", "environment_class", "environment_dataset"]
