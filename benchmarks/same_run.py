"""Are two run directories the same run? Metrics (times and throughputs aside), samples and the final adapter's
tensors, compared exactly. Used to check a refactor changed nothing (docs/log/2026-11-30.md, issue 18):

    python benchmarks/same_run.py RUN_A RUN_B [--new PREFIX ...]

--new PREFIX: metrics whose names start with PREFIX and that only RUN_B logs are new figures, not differences (a
change that adds a metric, e.g. --new mismatch/, checks that every other figure stayed the same).

Prints every differing metric value and one summary line; exits 1 when anything differs. It asserts nothing else.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(a: Path, b: Path, new: tuple[str, ...] = ()) -> int:
    from safetensors.torch import load_file

    rows_a = [json.loads(x) for x in (a / "metrics.jsonl").read_text().splitlines()]
    rows_b = [json.loads(x) for x in (b / "metrics.jsonl").read_text().splitlines()]
    diffs = 0
    for x, y in zip(rows_a, rows_b):
        for key in sorted(set(x) | set(y)):
            added = key not in x and key.startswith(new) if new else False
            if not key.startswith(("time/", "throughput/")) and not added and x.get(key) != y.get(key):
                diffs += 1
                print(f"step {x.get('step')} {key}: {x.get(key)} vs {y.get(key)}")
    samples = (a / "samples.jsonl").read_text() == (b / "samples.jsonl").read_text()
    wa = load_file(a / "final" / "adapter" / "adapter_model.safetensors")
    wb = load_file(b / "final" / "adapter" / "adapter_model.safetensors")
    weights = set(wa) == set(wb) and all(bool((wa[k] == wb[k]).all()) for k in wa)
    same = len(rows_a) == len(rows_b) and not diffs and samples and weights
    print(
        f"metrics rows {len(rows_a)} vs {len(rows_b)}; differing values (times aside): {diffs}; samples identical: "
        f"{samples}; adapter bit-identical: {weights} ({len(wa)} tensors)"
    )
    return 0 if same else 1


if __name__ == "__main__":
    args = sys.argv[1:]
    prefixes = tuple(args[i + 1] for i, a in enumerate(args) if a == "--new")
    paths = [a for i, a in enumerate(args) if a != "--new" and (i == 0 or args[i - 1] != "--new")]
    sys.exit(main(Path(paths[0]), Path(paths[1]), prefixes))
