"""`rlvr train CONFIG [--set key=value ...] [--resume]`: RLVR training from a config file or preset."""

from __future__ import annotations

from rlvr.cli.config_args import add_config_args, config_sets


def add_parser(subparsers):
    p = subparsers.add_parser("train", help="RLVR training from a config file")
    add_config_args(p)
    return p


def run(args) -> int:
    from rlvr.config import resolve
    from rlvr.training.loop import train

    cfg = resolve(args.config, config_sets(args))
    path = train(cfg, resume=args.resume, overwrite=args.overwrite, allow_config_change=args.allow_config_change)
    print(f"run directory: {path}")
    return 0
