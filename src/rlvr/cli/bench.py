"""`rlvr bench`: rlvr's step against TRL's GRPOTrainer (or its sampler against vLLM's), side by side.

The harness is not part of the importable product: it lives in the `rlvr_bench` package under benchmarks/
(installed beside rlvr from a checkout) and is imported only when this verb runs.
"""

from __future__ import annotations


def _harness():
    try:
        from rlvr_bench import bench
    except ImportError as e:
        raise SystemExit(
            f"rlvr bench: the benchmark harness (package rlvr_bench, in benchmarks/ of a checkout) "
            f"is not installed: {e}"
        ) from None
    return bench


def add_parser(subparsers):
    try:
        return _harness().add_parser(subparsers)
    except SystemExit as e:  # an install without the harness still lists the verb, and says why it cannot run
        p = subparsers.add_parser("bench", help="speed against TRL / vLLM (needs the benchmark harness)")
        p.set_defaults(why=str(e))
        return p


def run(args) -> int:
    return _harness().run(args)
