"""The config arguments `rlvr train` and `rlvr run` share: a config or preset, `--set` overrides, the run directory."""

from __future__ import annotations

import argparse


def add_config_source(
    p: argparse.ArgumentParser,
    example: str = "train.lr=1e-5",
    output_dir: str = "run directory (same as --set output_dir=...)",
) -> None:
    """A config file or preset, --set overrides, --output-dir and --overwrite: what every config-driven verb takes."""
    p.add_argument("config", nargs="?", help="YAML config file or preset name (default: built-in defaults)")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"override one config value, e.g. --set {example} (repeatable)",
    )
    p.add_argument("--output-dir", help=output_dir)
    p.add_argument("--overwrite", action="store_true", help="replace an existing output directory")


def add_config_args(p: argparse.ArgumentParser) -> None:
    """add_config_source, plus resuming a run (train, run)."""
    add_config_source(p)
    add_resume_args(p)


def add_resume_args(p: argparse.ArgumentParser) -> None:
    """--resume and --allow-config-change: every recipe resumes the same way (rlvr.training.lifecycle)."""
    p.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=False,
        metavar="RUN_DIR",
        help="continue a run: --resume RUN_DIR alone continues it from the config it holds "
        "(RUN_DIR/config.yaml, with any --set on top); bare --resume continues --output-dir",
    )
    p.add_argument("--allow-config-change", action="store_true", help="with --resume: accept a changed config")


def resume_command(args, run_dir) -> str:
    """The command that continues a run a signal stopped, as the user gave it: the verb, the config or preset, the
    --set overrides, then --resume RUN_DIR (`rlvr run` continues its own folder when run again: its command as given,
    less --overwrite, which would start over). Quoted for a POSIX shell."""
    import shlex

    words = ["rlvr", args.verb, *([args.config] if args.config else [])]
    if args.verb == "run":
        words += ["--preset", args.preset] if args.preset and not args.config else []
        words += ["--model", args.model] if getattr(args, "model", None) else []
        words += ["--task", args.task] if getattr(args, "task", None) else []
        words += ["--budget", f"{args.budget:g}"] if args.budget else []
        words += ["--steps", str(args.steps)] if args.steps else []
        words += ["--controls"] if args.controls else []
    words += ["--from-trl", args.from_trl] if getattr(args, "from_trl", None) else []
    for item in args.sets:
        words += ["--set", item]
    if args.verb == "run":
        return shlex.join(words + (["--output-dir", args.output_dir] if args.output_dir else []))
    if getattr(args, "from_trl", None):  # --from-trl takes a bare --resume of --output-dir (not --resume RUN_DIR)
        return shlex.join(words + ["--output-dir", str(run_dir), "--resume"])
    return shlex.join(words + (["--quiet"] if getattr(args, "quiet", False) else []) + ["--resume", str(run_dir)])


def config_sets(args) -> list[str]:
    """The --set overrides, with --output-dir as one more."""
    return list(args.sets) + ([f"output_dir={args.output_dir}"] if args.output_dir else [])


def resume_target(args, sets: list[str] | None = None, key: str = "output_dir") -> tuple[str | None, list[str]]:
    """(config source, --set overrides) with `--resume RUN_DIR` read: alone it continues the run from the config the
    run directory holds; with a CONFIG too, RUN_DIR is the output directory (`key`: sft.output_dir for rlvr sft).
    A file given as --resume's value is the CONFIG of the older `--resume CONFIG` order. `sets`: the overrides
    (default config_sets(args)). Sets args.resume to a bool."""
    from pathlib import Path

    from rlvr.errors import ConfigError

    value, sets = args.resume, config_sets(args) if sets is None else list(sets)
    args.resume = bool(value)
    if not isinstance(value, str):
        return args.config, sets
    path = Path(value)
    if path.is_file() and args.config is None:
        return value, sets
    if args.output_dir and Path(args.output_dir).resolve() != path.resolve():
        raise ConfigError(f"--resume {value} and --output-dir {args.output_dir} name different run directories")
    if not (path / "config.yaml").is_file():
        raise ConfigError(f"--resume {value}: not a run directory (no config.yaml there)")
    sets = [s for s in sets if not s.startswith(f"{key}=")] + [f"{key}={value}"]
    return (args.config or str(path / "config.yaml")), sets
