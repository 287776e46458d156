"""Does sampling ahead overlap with the update on this machine? A few steps of a preset at each rollout.max_staleness,
one after another in this process, and the mean figures of the steps after the first (the first loads and warms up):

    python benchmarks/ahead_overlap.py --ks 0,1 --steps 4 --set rollout.prompts_per_step=4 --set rollout.group_size=4

time/step at k = 0 is sampling + update one after the other; at k >= 1 it is the update plus whatever the trainer still
waited for its batch (time/wait_rollouts_s), so overlap shows as time/step below time/generate + time/verify +
time/train. time/other_cpu_share says how much of the CPU other processes took meanwhile: figures taken beside a
busy neighbour say little. The full comparison (steps per minute and held-out pass@1 at equal wall time, 3 seeds) is
benchmarks/staleness_experiment.sh. It asserts nothing: it measures.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

KEYS = [
    "time/step",
    "time/generate",
    "time/verify",
    "time/train",
    "time/wait_rollouts_s",
    "time/wait_weights_s",
    "time/other_cpu_share",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="default", help="a preset or a YAML config (default: default)")
    parser.add_argument("--ks", default="0,1", help="comma-separated rollout.max_staleness values")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()

    from rlvr.config import resolve
    from rlvr.training.loop import train

    quiet = ["log.eval_every=0", "eval.out_of_domain=[]", "log.checkpoint_every=0", "log.checkpoint_minutes=0"]
    print(f"| k | steps | {' | '.join(KEYS)} |")
    print("|---" * (len(KEYS) + 2) + "|")
    for k in [int(x) for x in args.ks.split(",")]:
        with tempfile.TemporaryDirectory() as out:
            sets = [*quiet, "model.save_merged=false", f"train.steps={args.steps}", "train.time_budget_min=0"]
            sets += [*args.sets, f"rollout.max_staleness={k}", f"output_dir={out}/run"]
            run = train(resolve(args.config, sets), quiet=True)
            rows = [json.loads(x) for x in (Path(run) / "metrics.jsonl").read_text().splitlines()][1:]
        means = [sum(r.get(key, 0.0) for r in rows) / max(len(rows), 1) for key in KEYS]
        print(f"| {k} | {len(rows)} | " + " | ".join(f"{m:.2f}" for m in means) + " |", flush=True)


if __name__ == "__main__":
    main()
