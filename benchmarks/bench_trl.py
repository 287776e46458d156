"""rlvr's training step against TRL's GRPOTrainer on the reference shape (issue 9), side by side.

    PYTHONPATH=src python benchmarks/bench_trl.py --trl-python /path/to/trl-venv/bin/python [rlvr bench flags]

The same as `rlvr bench` (see rlvr_bench.bench for what is measured and how): SmolLM2-135M-Instruct, rlvr's
arithmetic task and default reward, 4 prompts x 8 completions, 128 new tokens, LoRA r=16, bf16, one warm-up
step then 3 measured steps each, alternating. TRL runs in its own venv, e.g.

    python3 -m venv trl-venv && trl-venv/bin/pip install torch==2.13.0 && trl-venv/bin/pip install trl math-verify

It prints figures and asserts nothing; figures on a shared machine are noisy, so compare rows of one run only.
"""

from __future__ import annotations

import argparse
import sys

from rlvr_bench import bench


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench_trl.py")
    bench.add_parser(parser.add_subparsers(dest="verb"))
    return bench.run(parser.parse_args(["bench", *argv]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
