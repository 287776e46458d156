"""`rlvr run [--preset NAME] [--budget MINUTES | --steps N] [--controls]`: the main job on the embedded default, end to
end."""

from __future__ import annotations

import sys

from rlvr.cli.config_args import add_config_args, config_sets

# distill.coef for `rlvr run --teacher` where nothing else sets it: the experiment's choice (docs/distillation.md)
TEACHER_COEF = 1.0


def add_parser(subparsers):
    p = subparsers.add_parser("run", help="the main job on the embedded default, end to end")
    add_config_args(p)
    p.add_argument(
        "--preset",
        help="named preset (see rlvr/presets; default `default`, or with --model `reasoning`, tuned to a model that "
        "reasons)",
    )
    p.add_argument(
        "--model",
        metavar="FILE_OR_ID",
        help="your own model (a folder, a .gguf file or a hub id): model.name=FILE_OR_ID, on the `reasoning` preset "
        "unless --preset or a config says otherwise (longer completions for a chain of thought, the demonstration "
        "measured on the model); the report lists every setting that differs from the embedded default",
    )
    p.add_argument(
        "--task",
        metavar="NAME",
        help="the task to train and evaluate on (task.name=NAME, its settings only those of --set task.settings.*), "
        "e.g. --task jsonl --set task.settings.path=mine.jsonl",
    )
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--budget", type=float, help="minutes of RLVR training (trades time for quality)")
    budget.add_argument(
        "--steps",
        type=int,
        help="exactly N RL steps, no time budget: a result that does not depend "
        "on how busy the machine is (train.steps=N, train.time_budget_min=0)",
    )
    p.add_argument(
        "--teacher",
        metavar="RUN_OR_MODEL",
        help="distil from this teacher (a run directory, adapter or model folder, hub id with the policy's tokenizer): "
        f"distill.teacher=RUN_OR_MODEL and, unless set, distill.coef={TEACHER_COEF:g}; the report adds the teacher's "
        "held-out results and each model's reverse KL to it (docs/distillation.md)",
    )
    p.add_argument(
        "--controls",
        action="store_true",
        help="also train RL runs with the same budget, seed and settings under a random reward at the policy's "
        "own success rate and under the format reward alone, and report RLVR minus each "
        "(eval.controls=[random_rate, format_only])",
    )
    return p


def run_sets(args) -> list[str]:
    """The --set overrides the verb's own flags stand for, after (and so over) the config's, except --teacher's
    coefficient, which goes first: a distill.coef given with --set wins."""
    sets = config_sets(args) + ([f"train.time_budget_min={args.budget}"] if args.budget else [])
    sets = ([f"model.name={args.model}"] if args.model else []) + sets
    sets += [f"train.steps={args.steps}", "train.time_budget_min=0"] if args.steps else []
    sets += ["eval.controls=[random_rate, format_only]"] if args.controls else []
    if args.teacher:
        sets = [f"distill.coef={TEACHER_COEF}", f"distill.teacher={args.teacher}", *sets]
    return sets


# `rlvr run --model`'s preset where none is named: the main job tuned to a model that reasons (presets/reasoning.yaml)
OWN_MODEL_PRESET = "reasoning"


def run_config(args) -> dict:
    """The resolved config dict of `rlvr run`'s arguments: the config or preset (`reasoning` with --model), --set and
    the flags over it; --task replaces the task section whole (the preset's task settings belong to its task), its
    settings then those of --set task.settings.*."""
    from rlvr.config import merge, parse_set, resolve

    source = args.config or args.preset or (OWN_MODEL_PRESET if args.model else "default")
    sets = run_sets(args)
    if not args.task:
        return resolve(source, sets)
    cfg = resolve(source, [s for s in sets if not s.startswith("task.")])
    cfg["task"] = {"name": args.task, "settings": {}}
    for item in sets:
        if item.startswith("task."):
            cfg = merge(cfg, parse_set(item))
    return cfg


def run(args) -> int:
    """Start eval, RLVR, SFT baseline, evals, comparison and report; prints the summary."""
    from rlvr.config import ConfigError, as_config
    from rlvr.evaluation.compare import head_to_head_markdown
    from rlvr.training.main_job import run_main

    if isinstance(args.resume, str):  # the main job continues an existing output directory by itself
        raise ConfigError(f"rlvr run continues a run by itself: run `rlvr run --output-dir {args.resume}` again")

    if args.steps is not None and args.steps < 1:
        print(f"rlvr run: --steps must be at least 1, got {args.steps}", file=sys.stderr)
        return 2
    cfg = as_config(run_config(args))
    out = run_main(cfg, overwrite=args.overwrite)
    print("\n" + out["compare_md"])
    print(head_to_head_markdown(out["against_sft"]))
    print(f"report:  {out['report']}")
    for plot in out["plots"]:
        print(f"plot:    {plot}")
    print(f"wall time: {out['wall_line']}")
    return 0
