"""`rlvr convert-config trl RECIPE.yaml > rlvr.yaml`: a TRL GRPOConfig / open-r1 GRPO recipe as an rlvr config.

The config goes to stdout (headed by the report as YAML comments); the report (how keys were read, TRL defaults
used, the shaping-rule check, every key not mapped and why) also goes to stderr. `rlvr train --from-trl RECIPE`
does the same conversion and trains. rlvr.integrations.trl_recipe holds the mapping.
"""

from __future__ import annotations

import argparse
import sys

SOURCES = ("trl",)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "convert-config",
        help="a TRL / open-r1 GRPO recipe as an rlvr config",
        description="Map a TRL GRPOConfig or open-r1 GRPO recipe (YAML) to an rlvr config on "
        "stdout; every key that could not be mapped is listed with the reason.",
    )
    p.add_argument("source", choices=SOURCES, help="the recipe's framework (trl: GRPOConfig and open-r1 recipes)")
    p.add_argument("recipe", help="the recipe YAML file")
    p.add_argument("--quiet", action="store_true", help="no report on stderr (it stays in the output's header)")
    return p


def run(args) -> int:
    from rlvr.integrations.trl_recipe import convert, read_recipe, render, report

    conv = convert(read_recipe(args.recipe))
    if not args.quiet:
        print(report(conv, args.recipe), file=sys.stderr)
    sys.stdout.write(render(conv, args.recipe))
    return 0
