"""The main job (`rlvr run`): the whole loop the write-up describes, and its honest question answered.

1. Evaluate the starting model on the held-out split.
2. Train with RLVR (the preset's algorithm) within a time budget, logging validation accuracy.
3. Train the supervised baseline (rejection-sampling fine-tuning) on as many sampled completions as RLVR
   generated, so the two spend the same sampling compute.
4. Evaluate both on the same held-out problems, with the same samples per problem and the same verifier.
5. Compare them against the start per band (paired bootstrap), and write report.md with plots.

Every phase writes into one root folder; a phase whose output is already complete is not redone, so an
interrupted main job picks up where it stopped.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

from rlvr.config import Config, dump
from rlvr.rundir.files import RunDir, atomic_write_text, check_output_dir
from rlvr.rundir.final import add_heldout


def _phase_cfg(cfg: dict, out: Path) -> dict:
    sub = copy.deepcopy(cfg)
    sub["output_dir"] = str(out)
    return sub


def _evaluate(name: str, model, cfg: dict, root: Path, quiet: bool):
    """Held-out evaluation of one model into root/eval/<name>; reuses a finished one."""
    from rlvr.evaluation.records import read_records, write_records
    from rlvr.evaluation.run_eval import evaluate_model
    from rlvr.evaluation.summary import write_summary

    out = root / "eval" / name
    if (out / "summary.json").exists() and (out / "records.jsonl").exists():
        return read_records(out / "records.jsonl"), json.loads((out / "summary.json").read_text())
    e = Config.from_dict(cfg).eval
    records, summary = evaluate_model(
        model, cfg["task"]["name"], split=e.split, n=e.n, ks=e.ks, temperature=cfg["rollout"]["temperature"],
        max_new_tokens=cfg["rollout"]["max_new_tokens"], greedy=e.greedy, reward_cfg=cfg["reward"],
        backend=cfg["rollout"]["backend"], rollout=cfg["rollout"], seed=cfg["seed"], limit=e.limit or None, progress=not quiet,
        task_settings=cfg["task"]["settings"])
    summary["label"] = name
    write_records(records, out / "records.jsonl")
    write_summary(summary, out, "summary")
    return records, summary


def run_main(cfg: dict, *, overwrite: bool = False, quiet: bool = False) -> dict:
    """Run every phase; returns {"root", "report", "compare", "wall_s", ...} for the summary printout."""
    from rlvr.evaluation.compare import compare, compare_markdown, write_comparison
    from rlvr.evaluation.summary import summary_markdown
    from rlvr.policy.load import resolve_model_path
    from rlvr.training.sft import sft
    from rlvr.training.loop import train

    t0 = time.perf_counter()
    root = Path(cfg["output_dir"])
    resume = (root / "config.yaml").exists() and not overwrite
    check_output_dir(root, resume=resume, overwrite=overwrite)  # an unusable folder first, then the model:
    resolve_model_path(cfg["model"]["name"])  # a hub id the hub cannot give stops here, before any folder exists
    RunDir(root, resume=resume, overwrite=overwrite)
    atomic_write_text(root / "config.yaml", dump(cfg))
    timings: dict[str, float] = {}

    def timed(phase, fn, *args, **kw):
        start = time.perf_counter()
        out = fn(*args, **kw)
        timings[phase] = timings.get(phase, 0.0) + time.perf_counter() - start
        return out

    start_eval = timed("eval start", _evaluate, "start", cfg["model"]["name"], cfg, root, quiet)
    rl_dir = root / "rlvr"
    if not (rl_dir / "final" / "merged").exists():
        resume = (rl_dir / "checkpoints").exists()
        timed("train rlvr", train, _phase_cfg(cfg, rl_dir), resume=resume, overwrite=not resume, quiet=quiet)
    sft_dir = root / "sft"
    sft_cfg = _phase_cfg(cfg, sft_dir)
    sft_cfg["sft"].update(match_run=str(rl_dir), output_dir=str(sft_dir))
    if not (sft_dir / "final" / "merged").exists():
        timed("train sft", sft, sft_cfg, quiet=quiet, overwrite=True)
    evals = {"start": start_eval[0]}
    summaries = {"start": start_eval[1]}
    for name, run in (("sft", sft_dir), ("rlvr", rl_dir)):
        records, summary = timed(f"eval {name}", _evaluate, name, str(run), cfg, root, quiet)
        evals[name], summaries[name] = records, summary
        add_heldout(run / "final", summary_markdown(summary))  # the model card gets its held-out table
    result = compare(evals, baseline="start", metric="pass@1", seed=cfg["seed"])
    paths = write_comparison(result, root, "compare")
    wall = time.perf_counter() - t0
    report = _write_report(root, cfg, result, summaries, evals, timings, wall)
    return {"root": root, "report": report, "compare_md": compare_markdown(result), "compare": result,
            "plots": sorted((root / "plots").glob("*.png")) + [paths["png"]], "wall_s": wall, "timings": timings}


def _write_report(root, cfg, result, summaries, evals, timings, wall) -> Path:
    from rlvr.evaluation import report
    from rlvr.evaluation.compare import compare_markdown
    from rlvr.evaluation.summary import summary_markdown
    from rlvr.tasks import load_task

    rows = report.read_metrics(root / "rlvr")
    plots = {"RLVR training": report.training_plot(rows, root / "plots" / "training.png"),
             "Held-out pass@1 per band (95% CI)": root / "compare.png"}
    if any(k.startswith("band/") for k in (rows[0] if rows else {})):
        from rlvr.prompts.curriculum import plot_curriculum

        plots["Band share and reward over training"] = Path(plot_curriculum(rows, str(root / "plots" / "bands.png")))
    task = load_task(cfg["task"]["name"], **cfg["task"]["settings"])
    prompts = {p.id: p.prompt for p in task.problems(cfg["eval"]["split"])}
    pairs = report.example_pairs(evals["start"], evals["rlvr"], k=10)
    c = Config.from_dict(cfg)
    meta = {
        "model": c.model.name, "task": f"{c.task.name} {cfg['task']['settings'] or ''}".strip(),
        "algorithm": json.dumps(cfg["algorithm"]), "seed": c.seed,
        "rollout": f"{c.rollout.prompts_per_step} prompts x {c.rollout.group_size} samples, "
                   f"max {c.rollout.max_new_tokens} new tokens, temperature {c.rollout.temperature}, "
                   f"sampler {c.rollout.backend}",
        "budget": f"{c.train.steps} steps max, {c.train.time_budget_min:g} min of RL training; SFT matched on "
                  f"sampled completions",
        "steps trained": len(rows),
        "evaluation": f"{c.eval.split} split, {c.eval.n} samples per problem at temperature {c.rollout.temperature}"
                      f" + greedy, {c.eval.limit or 'all'} problems",
        "wall time": f"{wall / 60:.1f} min (" + ", ".join(f"{k} {v / 60:.1f}" for k, v in timings.items()) + ")",
        "versions": ", ".join(f"{k} {v}" for k, v in report.versions().items()),
    }
    return report.write_report(
        root, meta=meta, compare_md=compare_markdown(result),
        summaries_md={name: summary_markdown(s) for name, s in summaries.items()}, plots=plots,
        examples_md=report.examples_markdown(pairs, prompts), reading=reading(result))


def reading(result: dict) -> str:
    """A plain sentence per model: where it beats the start outside the noise, and where not."""
    out = []
    for model, per_band in result["diffs"].items():
        better = [b for b, d in per_band.items() if d["verdict"] == "better"]
        worse = [b for b, d in per_band.items() if d["verdict"] == "worse"]
        noise = [b for b, d in per_band.items() if d["verdict"] == "inside the noise"]
        parts = [f"{model} vs start:"]
        parts.append(f"better outside the 95% noise on {', '.join(better)};" if better else "no band better outside the noise;")
        if worse:
            parts.append(f"worse on {', '.join(worse)};")
        if noise:
            parts.append(f"inside the noise on {', '.join(noise)}.")
        out.append(" ".join(parts))
    return " ".join(out) + " The training reward is not the result: these are held-out problems none of the models trained on."
