"""`rlvr run [--preset NAME] [--budget MINUTES]`: the main job on the embedded default, end to end."""

from __future__ import annotations

from rlvr.cli.config_args import add_config_args, config_sets


def add_parser(subparsers):
    p = subparsers.add_parser("run", help="the main job on the embedded default, end to end")
    add_config_args(p)
    p.add_argument("--preset", default="default", help="named preset (see rlvr/presets)")
    p.add_argument("--budget", type=float, help="minutes of RLVR training (trades time for quality)")
    return p


def run(args) -> int:
    """Start eval, RLVR, SFT baseline, evals, comparison and report; prints the summary."""
    from rlvr.config import ConfigError, resolve
    from rlvr.training.main_job import run_main

    if isinstance(args.resume, str):  # the main job continues an existing output directory by itself
        raise ConfigError(f"rlvr run continues a run by itself: run `rlvr run --output-dir {args.resume}` again")

    sets = config_sets(args) + ([f"train.time_budget_min={args.budget}"] if args.budget else [])
    cfg = resolve(args.config or args.preset, sets)
    out = run_main(cfg, overwrite=args.overwrite)
    print("\n" + out["compare_md"])
    print(f"report:  {out['report']}")
    for plot in out["plots"]:
        print(f"plot:    {plot}")
    print(f"wall time: {out['wall_s'] / 60:.1f} min")
    return 0
