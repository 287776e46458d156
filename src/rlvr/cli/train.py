"""`rlvr train CONFIG [--set key=value ...] [--resume]`: RLVR training from a config file or preset.
`rlvr train --resume RUN_DIR`: continue a run from the config it holds.
`rlvr train --from-trl RECIPE.yaml [--set ...]`: from a TRL GRPOConfig / open-r1 recipe (rlvr convert-config trl)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlvr.cli.config_args import add_config_args, config_sets, resume_target

if TYPE_CHECKING:
    from rlvr.config import Config


def add_parser(subparsers):
    p = subparsers.add_parser("train", help="RLVR training from a config file")
    add_config_args(p)
    p.add_argument(
        "--from-trl",
        metavar="RECIPE",
        help="a TRL GRPOConfig / open-r1 recipe (YAML) instead of CONFIG; the conversion report goes to stderr",
    )
    return p


def _config(args) -> Config:
    """The one validated Config the run gets: the file or preset with --set (resolve), or the converted recipe."""
    from rlvr.config import DEFAULTS, ConfigError, as_config, merge, parse_set, resolve

    if not args.from_trl:
        return as_config(resolve(*resume_target(args)))
    if args.config or isinstance(args.resume, str):
        raise ConfigError("give a CONFIG, --resume RUN_DIR or --from-trl RECIPE, not two of them")
    args.resume = bool(args.resume)
    import sys

    from rlvr.integrations.conversion import refused_line
    from rlvr.integrations.trl_recipe import convert, read_recipe, report

    conv = convert(read_recipe(args.from_trl))
    refused = refused_line(conv, args.from_trl)
    if refused:  # a key TRL would refuse (a misspelling, mostly): TRL's default must not train in its place
        raise ConfigError(refused)
    print(report(conv, args.from_trl), file=sys.stderr)
    cfg = merge(DEFAULTS, conv.config)
    for item in config_sets(args):
        cfg = merge(cfg, parse_set(item))
    return as_config(cfg)


def run(args) -> int:
    from rlvr.training.loop import train
    from rlvr.training.signal_watch import stopped_without_signal

    cfg = _config(args)  # train() writes RUN/report.md and plots/ when training ends, a stop by signal too
    path = train(cfg, resume=args.resume, overwrite=args.overwrite, allow_config_change=args.allow_config_change)
    print(f"run directory: {path}")
    # stopped on purpose (exit 1): steps in a row without learning signal; the warning above says why
    return 1 if stopped_without_signal(path) else 0
