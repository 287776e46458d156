"""The tables of benchmarks/staleness_experiment.sh, from its output folder: one row per run (steps, steps per minute,
held-out pass@1 and greedy accuracy, and the means over steps of the staleness, wait, mismatch and correction
figures), then one row per k pooled over the seeds: k - k0 paired by problem (each problem's difference averaged over
the seeds), with rlvr compare's 95% paired bootstrap over problems (rlvr.evaluation.stats.paired_bootstrap, seeded).

    python benchmarks/staleness_pool.py OUT [KS [SEEDS]]     # KS, SEEDS: space-separated, default "0 1 2"
"""

import json
import sys
from pathlib import Path

from rlvr.evaluation.records import by_problem, read_records
from rlvr.evaluation.stats import mean_correct, paired_bootstrap

out = Path(sys.argv[1])
ks = (sys.argv[2] if len(sys.argv) > 2 else "0 1 2").split()
seeds = (sys.argv[3] if len(sys.argv) > 3 else "0 1 2").split()
base = ks[0]


def per_problem(path: Path, mode: str) -> dict[str, float]:
    """{problem_id: its share of correct samples} for one mode of an evaluation's records."""
    return {pid: mean_correct(hits) for pid, (_, hits) in by_problem(read_records(path), mode).items()}


keys = [
    "async/staleness_mean",
    "time/wait_rollouts_s",
    "time/wait_weights_s",
    "mismatch/k3_kl",
    "mismatch/abs_log_ratio",
    "correction/weight_mean",
    "reward/mean",
    "time/other_cpu_share",
]
print("| run | steps | steps/min | pass@1 | greedy | " + " | ".join(keys) + " |")
print("|---" * (5 + len(keys)) + "|")
tab = {}
for k in ks:
    for s in seeds:
        run = out / f"k{k}-seed{s}"
        rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
        c = json.loads((run / "contention.json").read_text())
        rec = out / f"eval-k{k}-seed{s}" / "records.jsonl"
        p1, g = per_problem(rec, "sampled"), per_problem(rec, "greedy")
        tab[(k, s)] = (c["steps"], c["steps_per_min"], p1, g)
        m = [
            sum(r[x] for r in rows if x in r) / sum(x in r for r in rows) if any(x in r for r in rows) else float("nan")
            for x in keys
        ]
        print(
            f"| k{k} seed {s} | {c['steps']} | {c['steps_per_min']:.2f} | {sum(p1.values()) / len(p1):.3f} | {sum(g.values()) / len(g):.3f} | "
            + " | ".join(f"{v:.4g}" for v in m)
            + " |"
        )
print()
print(
    f"| k | steps/min (mean of {len(seeds)} seeds) | steps (per seed) | pass@1 | greedy | pass@1 - k{base} [95% CI] | greedy - k{base} [95% CI] |"
)
print("|---|---|---|---|---|---|---|")
for k in ks:
    spm = sum(tab[(k, s)][1] for s in seeds) / len(seeds)
    steps = ", ".join(str(tab[(k, s)][0]) for s in seeds)
    cells = []
    for i in (2, 3):
        probs = tab[(k, seeds[0])][i].keys()
        cells.append(sum(sum(tab[(k, s)][i][p] for s in seeds) / len(seeds) for p in probs) / len(probs))
    diffs = []
    for i in (2, 3):
        probs = list(tab[(k, seeds[0])][i])  # each problem's value averaged over the seeds, then paired by problem
        a = [sum(tab[(k, s)][i][p] for s in seeds) / len(seeds) for p in probs]
        b = [sum(tab[(base, s)][i][p] for s in seeds) / len(seeds) for p in probs]
        m, lo, hi = paired_bootstrap(a, b)
        diffs.append(f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}]" if k != base else "")
    print(f"| {k} | {spm:.2f} | {steps} | {cells[0]:.3f} | {cells[1]:.3f} | {diffs[0]} | {diffs[1]} |")
