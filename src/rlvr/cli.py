"""The `rlvr` command: one verb per job. Argument parsing only; the work lives in the modules."""

from __future__ import annotations

import argparse
import sys


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", nargs="?", help="YAML config file or preset name (default: built-in defaults)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override one config value, e.g. --set train.lr=1e-5 (repeatable)")
    p.add_argument("--output-dir", help="run directory (same as --set output_dir=...)")
    p.add_argument("--resume", action="store_true", help="continue the run in the output directory")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output directory")
    p.add_argument("--allow-config-change", action="store_true", help="with --resume: accept a changed config")


def cmd_train(args) -> int:
    from rlvr.config import resolve
    from rlvr.trainer import train

    sets = list(args.sets) + ([f"output_dir={args.output_dir}"] if args.output_dir else [])
    cfg = resolve(args.config, sets)
    path = train(cfg, resume=args.resume, overwrite=args.overwrite, allow_config_change=args.allow_config_change)
    print(f"run directory: {path}")
    return 0


def cmd_run(args) -> int:
    """The main job: start eval, RLVR, SFT baseline, evals, comparison and report; prints the summary."""
    from rlvr.config import resolve
    from rlvr.pipeline import run_main

    sets = list(args.sets) + ([f"output_dir={args.output_dir}"] if args.output_dir else [])
    if args.budget:
        sets.append(f"train.time_budget_min={args.budget}")
    cfg = resolve(args.config or args.preset, sets)
    out = run_main(cfg, overwrite=args.overwrite)
    print("\n" + out["compare_md"])
    print(f"report:  {out['report']}")
    for plot in out["plots"]:
        print(f"plot:    {plot}")
    print(f"wall time: {out['wall_s'] / 60:.1f} min")
    return 0


def cmd_verify(args) -> int:
    from rlvr.verifiers import commands

    if args.verifier in CODE_KINDS:  # code verifiers score through their sandbox runner
        from rlvr.verifiers.code_commands import verify_code

        args.timeout = args.timeout_s
        return verify_code(args)
    return commands.run_verify(args)


def cmd_audit(args) -> int:
    from rlvr.verifiers import commands

    if args.verifier in CODE_KINDS:
        from rlvr.verifiers.code_commands import audit_code

        args.timeout = args.timeout_s
        return audit_code(args)
    return commands.run_audit(args)


CODE_KINDS = ("python_tests", "stdio")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlvr", description="Reinforcement learning with verifiable rewards.")
    sub = parser.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("train", help="RLVR training from a config file")
    _add_config_args(p)
    p.set_defaults(func=cmd_train)
    p = sub.add_parser("run", help="the main job on the embedded default, end to end")
    _add_config_args(p)
    p.add_argument("--preset", default="default", help="named preset (see rlvr/presets)")
    p.add_argument("--budget", type=float, help="minutes of RLVR training (trades time for quality)")
    p.set_defaults(func=cmd_run)

    from rlvr import bench, sft_verb
    from rlvr.evaluation import eval_verb
    from rlvr.evaluation import verbs as compare_verb
    from rlvr.verifiers import commands

    sft_verb.add_parser(sub).set_defaults(func=sft_verb.run)
    eval_verb.add_parser(sub).set_defaults(func=eval_verb.run)
    compare_verb.add_parser(sub).set_defaults(func=compare_verb.run)
    commands.add_verify_parser(sub).set_defaults(func=cmd_verify)
    commands.add_audit_parser(sub).set_defaults(func=cmd_audit)
    bench.add_parser(sub).set_defaults(func=bench.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    from rlvr.config import ConfigError
    from rlvr.runlog import RunDirError
    from rlvr.tasks.base import DatasetError

    from rlvr.trainer import TrainingAborted
    from rlvr.update import MicroBatchOOM

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ConfigError, DatasetError, RunDirError) as e:  # bad input: nothing was started
        print(f"rlvr {args.verb}: {e}", file=sys.stderr)
        return 2
    except (TrainingAborted, MicroBatchOOM) as e:  # stopped on purpose; the last checkpoint is intact
        print(f"rlvr {args.verb}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
