"""`rlvr compare` over evaluation records already on disk (no model needed): argument parsing and
the glue to compare / write_comparison. Evaluating models first is the lead's `rlvr eval` verb.

    rlvr compare base=runs/a/eval/records.jsonl rlvr=runs/b/eval/records.jsonl --out runs/b
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from rlvr.evaluation.compare import compare, compare_markdown, write_comparison
from rlvr.evaluation.records import EvalRecord, read_records


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "compare",
        help="paired comparison of evaluation records, per band",
        description="Compare models evaluated on the same problems: accuracy per band "
        "with bootstrap CIs, paired differences against the baseline, and a "
        "verdict per band, and pass@k against k when problems have several samples. Writes compare.json, "
        "compare.md and compare.png (and coverage.png).",
    )
    p.add_argument(
        "models",
        nargs="+",
        metavar="NAME=RECORDS",
        help="a model name and its records.jsonl (from rlvr eval); the first is the baseline "
        "unless --baseline says otherwise",
    )
    p.add_argument("--baseline", help="name of the model the others are compared against")
    p.add_argument("--metric", default="pass@1", help="pass@K or greedy (default pass@1)")
    p.add_argument("--out", default=".", help="folder for compare.json / .md / .png (default: here)")
    p.add_argument("--n-boot", type=int, default=2000, help="bootstrap draws (default 2000)")
    p.add_argument("--seed", type=int, default=0)
    return p


def parse_models(items: list[str]) -> dict[str, Path]:
    """['base=a.jsonl', 'rlvr=b.jsonl'] -> {'base': Path('a.jsonl'), ...}; ValueError names a bad item."""
    out: dict[str, Path] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"expected NAME=RECORDS, got {item!r}")
        if name in out:
            raise ValueError(f"model name {name!r} given twice")
        out[name] = Path(path)
    return out


def run(args) -> int:
    try:
        paths = parse_models(args.models)
        baseline = args.baseline or next(iter(paths))
        evals: dict[str, Sequence[EvalRecord]] = {name: read_records(path) for name, path in paths.items()}
        result = compare(evals, baseline=baseline, metric=args.metric, n_boot=args.n_boot, seed=args.seed)
    except (OSError, ValueError) as e:
        print(f"rlvr compare: {e}", file=sys.stderr)
        return 2
    written = write_comparison(result, args.out)
    if result.get("coverage"):  # n >= 2 samples a problem: pass@k against k, one line per model
        from rlvr.evaluation.coverage import as_summaries
        from rlvr.evaluation.report import pass_at_k_plot

        plot = pass_at_k_plot(as_summaries(result["coverage"]), Path(args.out) / "coverage.png")
        if plot is not None:  # None: nothing to plot
            written["coverage"] = plot
    print(compare_markdown(result))
    print("wrote " + ", ".join(str(p) for p in written.values()))
    return 0
