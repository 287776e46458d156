"""The tables of benchmarks/staleness_experiment.sh, from its output folder: one row per run (steps, steps per minute,
held-out pass@1 and greedy accuracy, and the means over steps of the staleness, wait, mismatch and correction
figures), then one row per k pooled over the seeds: k - k0 paired by problem (each problem's difference averaged over
the seeds), with a 95% bootstrap interval over problems (10,000 resamples, seeded).

    python benchmarks/staleness_pool.py OUT [KS [SEEDS]]     # KS, SEEDS: space-separated, default "0 1 2"
"""

import json
import random
import sys
from pathlib import Path

out = Path(sys.argv[1])
ks = (sys.argv[2] if len(sys.argv) > 2 else "0 1 2").split()
seeds = (sys.argv[3] if len(sys.argv) > 3 else "0 1 2").split()
base = ks[0]


def per_problem(path, mode):
    acc = {}
    for line in open(path):
        r = json.loads(line)
        if r["mode"] == mode:
            acc.setdefault(r["problem_id"], []).append(r["status"] == "correct")
    return {p: sum(v) / len(v) for p, v in acc.items()}


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
rng = random.Random(0)


def boot(d):
    ps = list(d)
    n = len(ps)
    means = sorted(sum(d[ps[rng.randrange(n)]] for _ in range(n)) / n for _ in range(10000))
    return sum(d.values()) / n, means[249], means[9749]


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
        d = {
            p: sum(tab[(k, s)][i][p] - tab[(base, s)][i][p] for s in seeds) / len(seeds) for p in tab[(k, seeds[0])][i]
        }
        m, lo, hi = boot(d)
        diffs.append(f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}]" if k != base else "")
    print(f"| {k} | {spm:.2f} | {steps} | {cells[0]:.3f} | {cells[1]:.3f} | {diffs[0]} | {diffs[1]} |")
