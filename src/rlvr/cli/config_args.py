"""The config arguments `rlvr train` and `rlvr run` share: a config or preset, `--set` overrides, the run directory."""

from __future__ import annotations

import argparse


def add_config_source(p: argparse.ArgumentParser, example: str = "train.lr=1e-5",
                      output_dir: str = "run directory (same as --set output_dir=...)") -> None:
    """A config file or preset, --set overrides, --output-dir and --overwrite: what every config-driven verb takes."""
    p.add_argument("config", nargs="?", help="YAML config file or preset name (default: built-in defaults)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help=f"override one config value, e.g. --set {example} (repeatable)")
    p.add_argument("--output-dir", help=output_dir)
    p.add_argument("--overwrite", action="store_true", help="replace an existing output directory")


def add_config_args(p: argparse.ArgumentParser) -> None:
    """add_config_source, plus resuming a run (train, run)."""
    add_config_source(p)
    add_resume_args(p)


def add_resume_args(p: argparse.ArgumentParser) -> None:
    """--resume and --allow-config-change: every recipe resumes the same way (rlvr.training.lifecycle)."""
    p.add_argument("--resume", action="store_true", help="continue the run in the output directory")
    p.add_argument("--allow-config-change", action="store_true", help="with --resume: accept a changed config")


def config_sets(args) -> list[str]:
    """The --set overrides, with --output-dir as one more."""
    return list(args.sets) + ([f"output_dir={args.output_dir}"] if args.output_dir else [])
