"""`rlvr sft CONFIG [--set ...]`: the supervised baseline from the same config file as `rlvr train`.

rlvr sft default --set sft.match_run=runs/train     # as many sampled completions as that RL run
"""

from __future__ import annotations

import argparse

from rlvr.cli.config_args import add_config_source, add_resume_args, resume_target


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "sft",
        help="supervised baseline: fine-tune on verifier-correct samples",
        description="Rejection-sampling fine-tuning: sample from the starting model on the "
        "training split, keep the completions the verifier marks correct, and "
        "fine-tune on them (LoRA, as the RL run) with a matched sampling budget. "
        "Settings: the `sft` section of the config.",
    )
    add_config_source(p, "sft.epochs=3", "run directory (same as --set sft.output_dir=...; default OUTPUT_DIR-sft)")
    add_resume_args(p)
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    return p


def run(args) -> int:
    from rlvr.config import as_config, resolve
    from rlvr.training.sft import sft

    sets = list(args.sets) + ([f"sft.output_dir={args.output_dir}"] if args.output_dir else [])
    path = sft(
        as_config(resolve(*resume_target(args, sets, "sft.output_dir"))),
        quiet=args.quiet,
        overwrite=args.overwrite,
        resume=args.resume,
        allow_config_change=args.allow_config_change,
    )
    print(f"run directory: {path}")
    return 0
