"""`rlvr eval`: evaluate one model on one split, write records.jsonl, summary.json and summary.md.

rlvr eval --model smollm2-135m-instruct --task arithmetic --split heldout --n 4 --limit 60
rlvr eval --model runs/train            # a run directory: its own task, settings and reward
rlvr eval --model runs/train/checkpoints/step-40    # the run at one of its checkpoints (training may go on)
rlvr eval --model trl-out/checkpoint-20 --task arithmetic   # a PEFT adapter folder on the base it names
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

# `rlvr eval --model MODEL`'s completion length where no run says one: room for a chain of thought (a model that
# reasons writes 150-400 tokens on a word problem of several steps; 128 cut it off, issue 72)
MODEL_TOKENS = 512


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "eval",
        help="held-out evaluation of one model, per difficulty band",
        description="Sample n completions per problem (plus one greedy), score them with the "
        "training verifier, and report pass@k and greedy accuracy per band with "
        "bootstrap CIs. Refuses a split that overlaps the training data.",
    )
    p.add_argument(
        "--model",
        required=True,
        metavar="PATH_OR_ID_OR_RUNDIR",
        help="embedded model name, local folder, .gguf file, hub id, a run directory (uses its final/merged "
        "model and its recorded task and reward), one of its checkpoints (RUN/checkpoints/step-N, "
        "the run's task and reward too), or a PEFT adapter folder (merged into the base it names)",
    )
    p.add_argument("--task", help="task name (default: the run directory's task)")
    p.add_argument("--split", default="heldout", help="split to evaluate (default heldout)")
    p.add_argument("--n", type=int, default=8, help="samples per problem (default 8; 0: the greedy decode only)")
    p.add_argument(
        "--k",
        default="",
        help="comma-separated k for pass@k (default: 1, 2, 4, ..., n and n itself, the "
        "coverage curve; k > n is dropped)",
    )
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument(
        "--max-new-tokens",
        type=int,
        help=f"new tokens per completion (default: a run's own rollout.max_new_tokens, else {MODEL_TOKENS}: room for a "
        "chain of thought; a model that answers in one line stops early)",
    )
    p.add_argument("--no-greedy", action="store_true", help="skip the greedy decode")
    p.add_argument(
        "--limit", type=int, help="evaluate N problems, taken evenly across bands (default, and 0: all problems)"
    )
    from rlvr.sampling import BACKENDS  # its names for the help; run() checks the value against it

    p.add_argument(
        "--backend",
        default=None,
        metavar="NAME",
        help=f"sampler backend: {BACKENDS.choices()} (default: the run directory's rollout.backend, else rollout's "
        "default, fast); one with settings (remote, vllm) reads them from the run directory's rollout section or "
        "from --set rollout.urls=[...] etc.",
    )
    _add_run_options(p)
    return p


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """How the evaluation runs and where it writes: seed, batch size, output, overrides, contamination."""
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--rows-per-call",
        type=int,
        default=32,
        help="sequences per generate call (default 32); more is faster on CPU but holds more rows' keys and values "
        "(and, on the hf backend, one step's rows x vocab logits) in memory",
    )
    p.add_argument(
        "--out",
        help="output folder (default RUNDIR/eval/SPLIT, else runs/eval/MODEL-TASK-SPLIT); one that exists is refused "
        "unless --overwrite",
    )
    p.add_argument(
        "--overwrite", action="store_true", help="replace the output folder when it exists (its evaluation is removed)"
    )
    p.add_argument(
        "--allow-contaminated",
        action="store_true",
        help="evaluate even when the split overlaps the training data (reported in summary.json)",
    )
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="task.settings.X=..., reward.X=..., rollout.X=..., model.prompt_format=chat|plain|auto (repeatable)",
    )
    p.add_argument(
        "--out-of-domain",
        action="store_true",
        help="also evaluate the run directory's eval.out_of_domain sets, each graded by its own task",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def parse_overrides(items: list[str]) -> tuple[dict, list[str]]:
    """['task.settings.per_band=50', 'reward.workers=0', 'rollout.urls=[...]', 'episode.environment=tool',
    'model.device=cuda', 'model.prompt_format=plain'] -> (task settings, the reward / rollout / episode / model.device
    / model.prompt_format --set items, which evaluation.run_eval.eval_config merges over the run's config as `rlvr
    train` merges --set over a file)."""
    from rlvr.config import ConfigError, parse_set

    settings, sets = {}, []
    for item in items:
        key = item.split("=", 1)[0].strip()
        if key.startswith("task.settings."):
            settings.update(parse_set(item)["task"]["settings"])
        elif key.startswith(("reward.", "rollout.", "episode.")) or key in ("model.device", "model.prompt_format"):
            sets.append(item)
        else:
            raise ConfigError(
                f"--set {item!r}: rlvr eval takes task.settings.*, reward.*, rollout.*, episode.*, model.device or "
                "model.prompt_format keys"
            )
    return settings, sets


# The whole numbers rlvr eval takes: flag, attribute, lowest value, the rule. Checked before anything loads.
NUMBERS = (
    ("--n", "n", 0, "samples per problem must be >= 1, or 0 for the greedy decode alone"),
    ("--max-new-tokens", "max_new_tokens", 1, "new tokens per completion must be >= 1"),
    ("--limit", "limit", 0, "problems to evaluate must be >= 1, or 0 for all of them"),
    ("--rows-per-call", "rows_per_call", 1, "sequences per generate call must be >= 1"),
)


def check_numbers(args) -> tuple[int, ...]:
    """The pass@k list (--k, else the coverage curve's), once every number is one rlvr eval can run with and
    --backend names a backend; a ConfigError naming the flag otherwise (before a model loads: --n -1 used to load it
    first)."""
    from rlvr.config import ConfigError
    from rlvr.evaluation.stats import coverage_ks
    from rlvr.sampling import BACKENDS

    if args.backend is not None:  # a name of the registry, or a plug-in that imports (None: the rollout section's)
        BACKENDS.check(args.backend, "--backend")

    for flag, attr, low, rule in NUMBERS:
        value = getattr(args, attr)
        if value is not None and value < low:
            raise ConfigError(f"{flag} {value}: {rule}")
    if args.n == 0 and args.no_greedy:
        raise ConfigError("--n 0 with --no-greedy: nothing to evaluate; give --n 1 or more, or drop --no-greedy")
    if not args.temperature > 0:
        raise ConfigError(
            f"--temperature {args.temperature:g}: the sampling temperature must be > 0 (the greedy decode runs beside "
            "the samples; --n 0 for it alone)"
        )
    try:
        ks = tuple(int(k) for k in args.k.split(",") if k.strip())
    except ValueError:
        raise ConfigError(f"--k {args.k!r}: give whole numbers separated by commas, e.g. 1,4,8") from None
    if any(k < 1 for k in ks):
        raise ConfigError(f"--k {args.k}: each k must be >= 1 (a k above --n is dropped)")
    return ks or tuple(coverage_ks(args.n))


def default_out(args) -> Path:
    from rlvr.evaluation.run_eval import is_checkpoint_dir, is_run_dir

    if is_run_dir(args.model):
        return Path(args.model) / "eval" / args.split
    if is_checkpoint_dir(args.model):  # beside the run's own evaluations: checkpoints are pruned as training goes
        return Path(args.model).parent.parent / "eval" / f"{Path(args.model).name}-{args.split}"
    slug = re.sub(r"[^\w.-]+", "_", f"{Path(args.model).name}-{args.task}-{args.split}")
    return Path("runs") / "eval" / slug


def run(args) -> int:
    from rlvr.config import ConfigError
    from rlvr.evaluation.records import write_records
    from rlvr.evaluation.run_eval import EvalSettings, eval_config, evaluate_model, run_config
    from rlvr.evaluation.summary import summary_markdown, write_summary
    from rlvr.rundir.card_update import card_after_eval
    from rlvr.rundir.files import RunDirError, check_output_dir
    from rlvr.tasks.hygiene import ContaminationError
    from rlvr.training.lifecycle import check_registered

    out = Path(args.out) if args.out else default_out(args)
    try:
        ks = check_numbers(args)
        settings, sets = parse_overrides(args.sets)
        # as rlvr train refuses its output directory: an earlier evaluation (the one a model card cites) is kept
        check_output_dir(
            out, overwrite=args.overwrite, choices="pass --overwrite to replace it, or --out another folder"
        )
        cfg = check_registered(eval_config(args.model, sets))
        tokens = args.max_new_tokens or (cfg.rollout.max_new_tokens if run_config(args.model) else MODEL_TOKENS)
        records, summary = evaluate_model(
            args.model,
            args.task,
            EvalSettings(
                split=args.split,
                n=args.n,
                ks=ks,
                temperature=args.temperature,
                max_new_tokens=tokens,
                greedy=not args.no_greedy,
                backend=args.backend,
                seed=args.seed,
                limit=args.limit,
                allow_contaminated=args.allow_contaminated,
                rows_per_call=args.rows_per_call,
                progress=not args.quiet,
            ),
            cfg=cfg,
            task_settings=settings,
        )
    except (ContaminationError, ConfigError, FileNotFoundError, ValueError, RunDirError) as e:
        print(f"rlvr eval: {e}", file=sys.stderr)
        return 2
    if args.overwrite and out.is_dir():
        shutil.rmtree(out)  # the earlier evaluation whole: an ood-* folder it had must not pass for this one's
    write_records(records, out / "records.jsonl")
    write_summary(summary, out, name="summary")
    print(summary_markdown(summary))
    h = summary["hygiene"]
    print(
        f"hygiene: {h['contaminated']} contaminated problems against {h['train_problems']} training problems; "
        f"{h['leaks']} prompts contain their gold answer (see summary.json)"
    )
    print(f"wall time {summary['setup']['wall_s']:.1f} s; wrote {out}/records.jsonl, summary.json, summary.md")
    card = card_after_eval(args.model, summary_markdown(summary), summary, out)  # a run's final model: its card
    if card:
        print(card)
    return _out_of_domain(args, out) if args.out_of_domain else 0


def _out_of_domain(args, out: Path) -> int:
    """The run's out-of-domain sets for this one model, into OUT/ood-<label>/ (rlvr run compares all three)."""
    from rlvr.evaluation.out_of_domain import evaluate_set, folder_name, ood_sets, trained_problems
    from rlvr.evaluation.records import write_records
    from rlvr.evaluation.run_eval import is_run_dir, read_run
    from rlvr.evaluation.summary import summary_markdown, write_summary

    if not is_run_dir(args.model):
        print("rlvr eval: --out-of-domain reads eval.out_of_domain from a run directory's config", file=sys.stderr)
        return 2
    cfg = read_run(args.model)[1]
    trained = trained_problems(cfg)
    for spec in ood_sets(cfg):
        records, summary = evaluate_set(args.model, spec, cfg, args.quiet, trained)
        folder = out / folder_name(spec)
        write_records(records, folder / "records.jsonl")
        write_summary(summary, folder, name="summary")
        print(f"\nout of domain: {spec['label']}\n" + summary_markdown(summary))
    return 0
