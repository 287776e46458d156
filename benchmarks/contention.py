"""How much of its quiet speed a run keeps when the CPU is shared (issue 49): the default preset's steps alone, then
beside a second identical run, then beside a plain CPU hog (a process that busy-loops on one core), each as steps per
minute of the training phase (RUN/contention.json) and as a share of the quiet rate. Run once per OpenMP wait policy
(rlvr sets OMP_WAIT_POLICY=PASSIVE unless the environment says otherwise); prints one table. Nothing else may run
on the machine meanwhile.

    python benchmarks/contention.py [--steps 4] [--policies ACTIVE,PASSIVE,PASSIVE:10000] [--out runs/contention]

An even split of 2 cores between two CPU-bound processes would leave each 50% of its quiet rate.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

SETS = ["log.eval_every=0", "train.time_budget_min=0", "log.checkpoint_every=0", "log.checkpoint_minutes=0"]


def train(out: Path, steps: int, policy: str) -> subprocess.Popen:
    sets = [x for s in SETS + [f"train.steps={steps}"] for x in ("--set", s)]
    cmd = [sys.executable, "-m", "rlvr", "train", "default", *sets, "--output-dir", str(out)]
    log = open(f"{out}.log", "w")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **policy_env(policy)})


def policy_env(policy: str) -> dict[str, str]:
    """The environment of a policy: ACTIVE or PASSIVE (OMP_WAIT_POLICY), or POLICY:N, that policy with
    GOMP_SPINCOUNT=N (libgomp spins N times, about N / 100,000 ms, before it sleeps)."""
    name, _, spins = policy.partition(":")
    return {"OMP_WAIT_POLICY": name, **({"GOMP_SPINCOUNT": spins} if spins else {})}


def rate(out: Path) -> float:
    return json.loads((out / "contention.json").read_text())["steps_per_min"]


def measure(root: Path, steps: int, policy: str) -> dict:
    tag = policy.replace(":", "-")  # a folder name
    quiet = root / f"{tag}-quiet"
    train(quiet, steps, policy).wait()
    a, b = train(root / f"{tag}-pair-a", steps, policy), train(root / f"{tag}-pair-b", steps, policy)
    a.wait(), b.wait()
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        train(root / f"{tag}-hog", steps, policy).wait()
    finally:
        hog.kill()
    q = rate(quiet)
    return {
        "quiet": q,
        "pair": [rate(root / f"{tag}-pair-{x}") / q for x in "ab"],
        "hog": rate(root / f"{tag}-hog") / q,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--policies", default="ACTIVE,PASSIVE")
    ap.add_argument("--out", default="runs/contention")
    args = ap.parse_args()
    root = Path(args.out)
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    rows = {p: measure(root, args.steps, p) for p in args.policies.split(",")}
    print(f"default preset, {args.steps} steps a run, {os.cpu_count()} cores ({time.time() - t0:.0f} s in all)")
    print("| OMP_WAIT_POLICY | quiet steps/min | two side by side: each, share of quiet | beside a CPU hog |")
    print("|---|---|---|---|")
    for p, r in rows.items():
        pair = " / ".join(f"{x:.0%}" for x in r["pair"])
        print(f"| {p} | {r['quiet']:.2f} | {pair} | {r['hog']:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
