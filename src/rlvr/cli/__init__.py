"""The `rlvr` command: one module per verb, each with `add_parser(subparsers)` and `run(args) -> exit code`.
Argument parsing only; the work lives in the components the verbs call.

In: the command line. Out: an exit code (0 done, 1 stopped on purpose or a check failed, 2 bad input).
"""

from __future__ import annotations

import argparse
import importlib
import sys

# verb -> module under rlvr.cli, in the order `rlvr --help` lists them
VERBS = (
    "run",
    "train",
    "sft",
    "eval",
    "compare",
    "verify",
    "audit",
    "serve",
    "convert-config",
    "bench",
    "export",
    "list",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlvr", description="Reinforcement learning with verifiable rewards.")
    sub = parser.add_subparsers(dest="verb", required=True)
    for verb in VERBS:
        module = importlib.import_module(f"rlvr.cli.{verb.replace('-', '_')}")
        module.add_parser(sub).set_defaults(func=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    from rlvr.config import ConfigError
    from rlvr.policy.memory import MicroBatchOOM
    from rlvr.rundir.files import RunDirError
    from rlvr.tasks.base import DatasetError
    from rlvr.training.lifecycle import RunStopped, TrainingAborted

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ConfigError, DatasetError, RunDirError) as e:  # bad input: nothing was started
        print(f"rlvr {args.verb}: {e}", file=sys.stderr)
        return 2
    except (TrainingAborted, MicroBatchOOM) as e:  # stopped on purpose; the last checkpoint is intact
        print(f"rlvr {args.verb}: {e}", file=sys.stderr)
        return 1
    except RunStopped as e:  # Ctrl-C / SIGTERM after a checkpoint: the command that continues, ready to paste
        if e.is_main:
            from rlvr.cli.config_args import resume_command

            print(f"resume with: {resume_command(args, e.run_path)}")
        return e.exit_code
    except KeyboardInterrupt:  # Ctrl-C outside a training step (start-up, a second Ctrl-C): no traceback
        print(f"rlvr {args.verb}: interrupted", file=sys.stderr)
        return 130


__all__ = ["main", "build_parser", "VERBS"]
