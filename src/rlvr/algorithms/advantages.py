"""Group-relative advantages, the dynamic-sampling selection and DAPO's overlong handling.

Everything here is a pure function of per-row tensors (rows = completions, B = P prompts x G samples).
Groups are given by `group_ids` (B,): any integers, equal for the rows that answer the same prompt; rows
of one group need not be contiguous.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rlvr.registry import Registry

Values = torch.Tensor | Sequence[float]  # per-row numbers (B,): a tensor, or a list (rewards as verifiers give them)
Ids = torch.Tensor | Sequence[int]  # per-row group ids (B,)


def _as_float(x: Values) -> torch.Tensor:
    t = torch.as_tensor(x)
    return t if t.is_floating_point() else t.to(torch.float32)


def _group_index(group_ids: Ids) -> tuple[torch.Tensor, int]:
    """Map arbitrary group ids (B,) to dense indices 0..K-1 (B,) and return K."""
    ids = torch.as_tensor(group_ids)
    if ids.dim() != 1:
        raise ValueError(f"group_ids must be 1-D (B,), got shape {tuple(ids.shape)}")
    _, inverse = torch.unique(ids, return_inverse=True)
    return inverse, int(inverse.max().item()) + 1 if ids.numel() else 0


def group_stats(rewards: Values, group_ids: Ids) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-row statistics of the row's group.

    rewards (B,), group_ids (B,) -> (mean (B,), sample std (B,), constant (B,) bool).
    The std is the sample standard deviation (divide by N-1, as torch.std, TRL and verl do); a group of
    one row has std 0. `constant` is True where every reward in the row's group is equal (exactly, no
    tolerance: rewards from verifiers are exact numbers).
    """
    r = _as_float(rewards)
    idx, k = _group_index(group_ids)
    if r.shape != idx.shape:
        raise ValueError(f"rewards {tuple(r.shape)} and group_ids {tuple(idx.shape)} must both be (B,)")
    idx = idx.to(r.device)
    zeros = torch.zeros(k, dtype=r.dtype, device=r.device)
    count = zeros.index_add(0, idx, torch.ones_like(r))
    mean = zeros.index_add(0, idx, r) / count
    sq = zeros.index_add(0, idx, (r - mean[idx]) ** 2)
    # sample variance: sum of squares / (N - 1); N = 1 gives 0 / 0, which we define as 0.
    var = torch.where(count > 1, sq / (count - 1).clamp(min=1), torch.zeros_like(sq))
    lo = torch.full_like(zeros, float("inf")).scatter_reduce(0, idx, r, "amin")
    hi = torch.full_like(zeros, float("-inf")).scatter_reduce(0, idx, r, "amax")
    return mean[idx], var.sqrt()[idx], (lo == hi)[idx]


def _group_std(r: torch.Tensor, std: torch.Tensor, batch_rewards: torch.Tensor) -> torch.Tensor:
    return std


def _batch_std(r: torch.Tensor, std: torch.Tensor, batch_rewards: torch.Tensor) -> torch.Tensor:
    return batch_rewards.std() if batch_rewards.numel() > 1 else batch_rewards.new_zeros(())


# divisor(r (B,), group std (B,), batch_rewards (N,)) -> the std to divide r - mean_g by
Divisor = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class AdvantageScale:
    """How r - mean_g is scaled. divisor(r (B,), group std (B,), batch_rewards (N,)) -> the std to divide by, or
    divisor None: do not divide. batch_rewards are every reward of the step's batch: this process's rewards alone, or
    under data parallel every rank's, gathered in rank order. reads_batch: whether the divisor reads them; only then
    does a data-parallel step gather them (a collective), so a scale that never looks at them costs nothing."""

    divisor: Divisor | None
    reads_batch: bool = True


def _plugin_scale(obj: Any, name: str) -> AdvantageScale:
    """A user's scale: an AdvantageScale as it is, or a bare divisor function, which gets the whole batch's rewards
    as a built-in does (reads_batch)."""
    return obj if isinstance(obj, AdvantageScale) else AdvantageScale(obj)


# by name; a new scale is a new entry, or `package.module:attr` in algorithm.adv_scale
ADVANTAGE_SCALES: Registry[AdvantageScale] = Registry(
    "advantage scale", key="algorithm.adv_scale", plugin=_plugin_scale
)
ADVANTAGE_SCALES.add("group", AdvantageScale(_group_std, reads_batch=False), "GRPO: divide by the group's sample std")
ADVANTAGE_SCALES.add("batch", AdvantageScale(_batch_std), "divide by the std of every reward in the (global) batch")
ADVANTAGE_SCALES.add("none", AdvantageScale(None, reads_batch=False), "Dr. GRPO: no division")


def group_advantages(
    rewards: Values, group_ids: Ids, scale: str = "group", eps: float = 1e-4, batch_rewards: Values | None = None
) -> torch.Tensor:
    """Group-relative advantage of every row.

    rewards (B,) float, group_ids (B,) int -> advantages (B,) float (rewards' dtype, float32 for ints).
    scale="group": A = (r - mean_g) / (std_g + eps)   (GRPO; std_g = sample std of the group, N-1)
    scale="batch": A = (r - mean_g) / (std_B + eps)   (std_B = sample std of all B rewards, or of
                   `batch_rewards` (N,) when given: the global batch's rewards under data parallel)
    scale="none":  A =  r - mean_g                     (Dr. GRPO: no std, which biases toward easy/hard)
    A group whose rewards are all equal (including a group of one row) gets exactly 0: it carries no
    learning signal, and float rounding of the mean must not invent one.
    """
    r = _as_float(rewards)
    mean, std, constant = group_stats(r, group_ids)
    centered = r - mean
    divisor = ADVANTAGE_SCALES.get(scale).divisor
    if divisor is None:
        adv = centered
    else:
        batch = r if batch_rewards is None else _as_float(batch_rewards)
        adv = centered / (divisor(r, std, batch) + eps)
    return torch.where(constant, torch.zeros_like(adv), adv)


def nonzero_variance_groups(rewards: Values, group_ids: Ids) -> torch.Tensor:
    """Row mask (B,) bool: True where the row's group has at least two different rewards."""
    return ~group_stats(rewards, group_ids)[2]


def shaping_only_groups(rewards: Values, graded: Values, group_ids: Ids) -> torch.Tensor:
    """Row mask (B,) bool: True where the row's group has different rewards but one graded score: every sample
    solved it, or none did, and what varies is shaping (a format term, an overlong penalty). Divided by its own small
    std, such a group's advantages are as large as a solved-against-unsolved group's: a 0.1 format term then pushes
    as hard as correctness does (the metric `adv/shaping_only_share` says how much of a step's advantage this is)."""
    return nonzero_variance_groups(rewards, group_ids) & group_stats(graded, group_ids)[2]


def nonzero_variance_frac(rewards: Values, group_ids: Ids) -> torch.Tensor:
    """Fraction of *groups* (not rows) with nonzero reward variance, a 0-d float tensor.

    This is the metric `groups/nonzero_var_frac`: the share of prompts that give any gradient.
    """
    rewards, group_ids = torch.as_tensor(rewards).cpu(), torch.as_tensor(group_ids).cpu()
    idx, k = _group_index(group_ids)
    if k == 0:
        return torch.zeros(())
    informative = nonzero_variance_groups(rewards, group_ids).to(torch.float32)
    # every row of a group has the same flag, so the per-group max is the group's flag
    per_group = torch.zeros(k).scatter_reduce(0, idx, informative, "amax")
    return per_group.mean()


def _group_order(group_ids: Ids) -> tuple[torch.Tensor, torch.Tensor]:
    """Dense group index per row (B,) and the groups (K,) ordered by first appearance."""
    idx, k = _group_index(group_ids)
    first = torch.full((k,), idx.numel(), dtype=torch.long)
    first = first.scatter_reduce(0, idx, torch.arange(idx.numel()), "amin")
    return idx, torch.argsort(first)


def select_informative_groups(rewards: Values, group_ids: Ids, max_groups: int | None = None) -> torch.Tensor:
    """DAPO's dynamic-sampling filter: row mask (B,) bool of the groups worth training on.

    Keeps every row of each group whose rewards are not all equal (a constant group has advantage 0
    everywhere and only dilutes the batch), at most `max_groups` groups, taken in order of first
    appearance so the choice is deterministic. Works on the CPU (a host-side decision); mask on CPU.
    """
    rewards, group_ids = torch.as_tensor(rewards).cpu(), torch.as_tensor(group_ids).cpu()
    idx, order = _group_order(group_ids)
    informative_row = nonzero_variance_groups(rewards, group_ids)
    k = order.numel()
    informative = torch.zeros(k, dtype=torch.bool).scatter_reduce(0, idx, informative_row, "amax")
    chosen = order[informative[order]]
    if max_groups is not None:
        chosen = chosen[: max(0, max_groups)]
    keep = torch.zeros(k, dtype=torch.bool)
    keep[chosen] = True
    return keep[idx]


def dynamic_sampling(
    draw: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
    want_groups: int,
    max_rounds: int,
    exchange: Callable[[int], tuple[int, int]] | None = None,
) -> tuple[list[tuple[int, torch.Tensor]], dict[str, int]]:
    """Refill a batch with informative groups, DAPO style.

    draw(round) generates and scores one more round of rollouts and returns its (rewards (B_r,),
    group_ids (B_r,)). Rounds continue until `want_groups` informative groups are kept or `max_rounds`
    rounds ran (then the batch is smaller; with 0 groups the caller should skip the step).
    exchange(n): data parallel, where each rank draws its block of the prompts: given the informative groups
    this rank found in the round, returns (those found by earlier ranks, those found by all ranks). Earlier
    ranks' groups come first, so the kept groups are those one process would keep. None: one process.
    Returns ([(round, kept row indices (n,) long), ...], {"dynamic_sampling/generated_groups": g,
    "dynamic_sampling/kept_groups": k, "dynamic_sampling/rounds": n}), g and k counted on this rank.
    """
    kept: list[tuple[int, torch.Tensor]] = []
    generated = have = kept_here = rounds = 0
    while have < want_groups and rounds < max_rounds:
        rewards, group_ids = draw(rounds)
        group_ids = torch.as_tensor(group_ids)
        rounds += 1
        generated += _group_index(group_ids)[1]
        found = _group_index(group_ids[select_informative_groups(rewards, group_ids)])[1]
        before, total = exchange(found) if exchange is not None else (0, found)
        rows = select_informative_groups(rewards, group_ids, max_groups=max(0, want_groups - have - before))
        kept_here += _group_index(group_ids[rows])[1]
        have += min(total, want_groups - have)
        kept.append((rounds - 1, torch.nonzero(rows).flatten()))
    stats = {
        "dynamic_sampling/generated_groups": generated,
        "dynamic_sampling/kept_groups": kept_here,
        "dynamic_sampling/rounds": rounds,
    }
    return kept, stats


def overlong_soft_penalty(lengths: Values, max_len: int, buffer: int) -> torch.Tensor:
    """DAPO's soft overlong punishment, added to the reward: lengths (B,) -> penalty (B,) float.

    With L = completion length, Lmax = max_len, Lc = buffer:
      0                      if L <= Lmax - Lc
      (Lmax - Lc - L) / Lc   if Lmax - Lc < L <= Lmax     (linear from 0 down to -1)
      -1                     if L > Lmax
    buffer = 0 is a hard cliff: 0 up to Lmax, -1 beyond.
    """
    if not 0 <= buffer <= max_len:
        raise ValueError(f"overlong buffer must be in [0, max_len={max_len}], got {buffer}")
    length = _as_float(lengths)
    if buffer == 0:
        return torch.where(length > max_len, -torch.ones_like(length), torch.zeros_like(length))
    start = max_len - buffer
    return ((start - length) / buffer).clamp(min=-1.0, max=0.0)


def truncated_rows(finish: Sequence[str]) -> torch.Tensor:
    """Rows whose generation hit the length limit: finish (B,) of "stop" | "length" -> (B,) bool. DAPO's overlong
    filtering keeps them out of the loss (rlvr.training.batch.overlong_shaping): a completion cut off was not shown
    wrong, so its reward says nothing about its reasoning; it still counts in its group's advantage statistics."""
    return torch.tensor([f == "length" for f in finish], dtype=torch.bool)


# DAPO's overlong shaping by name (algorithm.overlong): fn(rewards (B,), keep (B,), lengths (B,), finish (B,), limit,
# buffer) -> (rewards, keep), for rows of `lengths` out of `limit` tokens with a soft buffer of `buffer` tokens. A new
# shaping is a new entry, or `package.module:attr`.
Shaping = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, Sequence[str], int, int], tuple[torch.Tensor, torch.Tensor]
]


def _no_shaping(
    rewards: torch.Tensor, keep: torch.Tensor, lengths: torch.Tensor, finish: Sequence[str], limit: int, buffer: int
) -> tuple[torch.Tensor, torch.Tensor]:
    return rewards, keep


def _soft_shaping(
    rewards: torch.Tensor, keep: torch.Tensor, lengths: torch.Tensor, finish: Sequence[str], limit: int, buffer: int
) -> tuple[torch.Tensor, torch.Tensor]:
    return rewards + overlong_soft_penalty(lengths, limit, buffer), keep


def _filter_shaping(
    rewards: torch.Tensor, keep: torch.Tensor, lengths: torch.Tensor, finish: Sequence[str], limit: int, buffer: int
) -> tuple[torch.Tensor, torch.Tensor]:
    return rewards, keep * (~truncated_rows(finish)).to(keep.dtype)


@dataclass(frozen=True)
class OverlongShaping:
    """An OVERLONG_SHAPINGS entry, called as its `shape`. masks_truncated: whether it takes a truncated row (finish
    "length") out of the loss, as TRL's mask_truncated_completions does (what the TRL recipe converter asks)."""

    shape: Shaping
    masks_truncated: bool = False

    def __call__(
        self,
        rewards: torch.Tensor,
        keep: torch.Tensor,
        lengths: torch.Tensor,
        finish: Sequence[str],
        limit: int,
        buffer: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.shape(rewards, keep, lengths, finish, limit, buffer)


def _plugin_shaping(obj: Any, name: str) -> OverlongShaping:
    """A user's shaping: an OverlongShaping as it is, or a bare Shaping function (it declares no masking)."""
    return obj if isinstance(obj, OverlongShaping) else OverlongShaping(obj)


OVERLONG_SHAPINGS: Registry[OverlongShaping] = Registry(
    "overlong shaping", key="algorithm.overlong", plugin=_plugin_shaping
)
OVERLONG_SHAPINGS.add("none", OverlongShaping(_no_shaping), "no length shaping")
OVERLONG_SHAPINGS.add(
    "filter",
    OverlongShaping(_filter_shaping, masks_truncated=True),
    "DAPO: a truncated row (finish length) leaves the loss",
)
OVERLONG_SHAPINGS.add(
    "soft", OverlongShaping(_soft_shaping), "DAPO: a linear reward penalty over the last overlong_buffer_frac"
)


__all__ = [
    "ADVANTAGE_SCALES",
    "OVERLONG_SHAPINGS",
    "OverlongShaping",
    "group_stats",
    "group_advantages",
    "nonzero_variance_groups",
    "nonzero_variance_frac",
    "shaping_only_groups",
    "select_informative_groups",
    "dynamic_sampling",
    "overlong_soft_penalty",
    "truncated_rows",
]
