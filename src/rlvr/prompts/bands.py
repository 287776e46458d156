"""Per-band figures of one step, from the batch's bands, rewards and groups: the stats a curriculum updates from
(success, reward, informative fraction per band), the flat band/<name>/* metrics of the step's log line, and the
plot of band shares and rewards over training."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

STAT_KEYS = ("reward", "success", "nonzero_var_frac")


def band_stats(
    bands: Sequence[str], rewards: Sequence[float], group_ids: Sequence[Any], success: Sequence[Any] | None = None
) -> dict[str, dict[str, float]]:
    """Per-band stats of one step, in the form `update` takes.

    bands, rewards, group_ids, success: (B,) per completion (lists, arrays or tensors). A group is
    informative when its rewards are not all equal. `success` defaults to reward > 0.
    Returns {band: {"reward": mean over completions, "success": mean, "nonzero_var_frac": over groups,
    "groups": int}}.
    """
    if success is None:
        success = [float(r) > 0 for r in rewards]
    if not len(bands) == len(rewards) == len(group_ids) == len(success):
        raise ValueError(f"band_stats: lengths differ: {len(bands)}, {len(rewards)}, {len(group_ids)}, {len(success)}")
    groups: dict[Any, tuple[str, list[float], list[float]]] = {}
    for b, r, g, s in zip(bands, rewards, group_ids, success):
        g = g.item() if hasattr(g, "item") else g
        band, rs, ss = groups.setdefault(g, (b, [], []))
        if band != b:
            raise ValueError(f"band_stats: group {g!r} mixes bands {band!r} and {b!r}")
        rs.append(float(r))
        ss.append(float(s))
    acc: dict[str, list[float]] = {}  # band -> [groups, informative groups, completions, reward sum, success sum]
    for band, rs, ss in groups.values():
        a = acc.setdefault(band, [0, 0, 0, 0.0, 0.0])
        a[0] += 1
        a[1] += max(rs) - min(rs) > 1e-9
        a[2] += len(rs)
        a[3] += sum(rs)
        a[4] += sum(ss)
    return {
        b: {"reward": a[3] / a[2], "success": a[4] / a[2], "nonzero_var_frac": a[1] / a[0], "groups": a[0]}
        for b, a in acc.items()
    }


def band_metrics(
    bands: Sequence[str], rewards: Sequence[float], group_ids: Sequence[Any], success: Sequence[Any] | None = None
) -> dict[str, float]:
    """Flat per-band metrics for the step's log line: band/<name>/{reward,success,nonzero_var_frac,share},
    where share is the band's fraction of this batch's groups."""
    stats = band_stats(bands, rewards, group_ids, success)
    n_groups = sum(st["groups"] for st in stats.values())
    out: dict[str, float] = {}
    for b, st in stats.items():
        for k in STAT_KEYS:
            out[f"band/{b}/{k}"] = st[k]
        out[f"band/{b}/share"] = st["groups"] / n_groups
    return out


def natural_key(name: str) -> list:
    """ "d2" before "d10": digit runs compare as numbers."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", name) if t]


def plot_curriculum(metrics_rows: Sequence[dict], path: str, bands: Sequence[str] | None = None) -> str:
    """Two panels from metrics rows ({"step", "band/<name>/share", "band/<name>/reward", ...}): the share
    of each band over training (stacked; a band absent from a step has share 0) beside each band's
    training reward (gaps where it was not sampled). `bands` gives the order (easy first; the sampler's
    `.bands`); by default the names found, sorted with digit runs as numbers. Writes a PNG atomically."""
    import os

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if bands is None:
        found = {k[5:-6] for row in metrics_rows for k in row if k.startswith("band/") and k.endswith("/share")}
        bands = sorted(found, key=natural_key)
    steps = [row.get("step", i) for i, row in enumerate(metrics_rows)]
    fig, (ax_s, ax_r) = plt.subplots(1, 2, figsize=(11, 4))
    shares = [[row.get(f"band/{b}/share", 0.0) for row in metrics_rows] for b in bands]
    if bands:
        ax_s.stackplot(steps, shares, labels=bands)
    for b in bands:
        ax_r.plot(steps, [row.get(f"band/{b}/reward", math.nan) for row in metrics_rows], label=b)
    ax_s.set(title="share of batch by band", xlabel="step", ylabel="share", ylim=(0, 1))
    ax_r.set(title="training reward by band", xlabel="step", ylabel="mean reward")
    for ax in (ax_s, ax_r):
        if bands:
            ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    tmp = f"{path}.tmp.png"
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)
    return path


__all__ = ["STAT_KEYS", "band_stats", "band_metrics", "natural_key", "plot_curriculum"]
